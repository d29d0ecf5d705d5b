package fsm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// An entry whose bytes differ from what its proposer checksummed never
// applies, nor does anything after it; the FSM reports the fault once and
// refuses snapshots, whose index Raft would take from its own count.
func Test_ApplyBatch_DamagedCommandNeverApplies(t *testing.T) {
	var faults []error
	h := &harness{t: t, dir: t.TempDir(), opts: Options{OnLogFault: func(err error) { faults = append(faults, err) }}}
	h.f = mustOpen(t, h.dir, h.opts)
	mk := func(i uint64) *raft.Log {
		l := entry(t, i, enqueueCmd(at(0), nt("q", "t", 0)))
		l.Extensions = CommandExtension(l.Data, LevelBase)
		return l
	}
	good, bad, after := mk(1), mk(2), mk(3)
	j := bytes.Index(bad.Data, []byte(payload))
	bad.Data[j] ^= 0x01 // still a valid command, with another payload

	res := h.f.ApplyBatch([]*raft.Log{good, bad, after})
	if r, ok := res[0].(*pb.CommandResult); !ok || r.GetItems()[0].GetCode() != pb.Code_CODE_OK {
		t.Fatalf("entry before the damaged one: %v", res[0])
	}
	for i, r := range res[1:] {
		if err, ok := r.(error); !ok || !errors.Is(err, ErrChecksum) {
			t.Fatalf("result %d: %v, want ErrChecksum", i+1, r)
		}
	}
	if got := h.f.AppliedIndex(); got != 1 {
		t.Fatalf("applied index %d, want 1", got)
	}
	if got := h.stats("q", "t").GetPending(); got != 1 {
		t.Fatalf("%d pending tasks, want 1", got)
	}
	if !errors.Is(h.f.LogFault(), ErrChecksum) || len(faults) != 1 {
		t.Fatalf("LogFault %v, %d reports", h.f.LogFault(), len(faults))
	}
	res = h.f.ApplyBatch([]*raft.Log{mk(4)})
	if _, ok := res[0].(error); !ok || h.f.AppliedIndex() != 1 {
		t.Fatalf("after the fault: result %v, applied %d", res[0], h.f.AppliedIndex())
	}
	if _, err := h.f.Snapshot(); !errors.Is(err, ErrChecksum) {
		t.Fatalf("snapshot after the fault: %v", err)
	}
}

func Test_VerifyCommand(t *testing.T) {
	data := []byte("command bytes")
	ext := CommandExtension(data, LevelBase)
	cases := []struct {
		name string
		l    raft.Log
		ok   bool
	}{
		{"intact", raft.Log{Type: raft.LogCommand, Data: data, Extensions: ext}, true},
		{"legacy, no extensions", raft.Log{Type: raft.LogCommand, Data: data}, true},
		{"raft's own entry", raft.Log{Type: raft.LogConfiguration, Data: data, Extensions: []byte("x")}, true},
		{"later bytes reserved", raft.Log{Type: raft.LogCommand, Data: data, Extensions: append(bytes.Clone(ext), 7)}, true},
		{"data changed", raft.Log{Type: raft.LogCommand, Data: []byte("command bytez"), Extensions: ext}, false},
		{"checksum changed", raft.Log{Type: raft.LogCommand, Data: data, Extensions: append(bytes.Clone(ext[:7]), ext[7]^1)}, false},
		{"magic changed", raft.Log{Type: raft.LogCommand, Data: data, Extensions: append([]byte("dkc2"), ext[4:]...)}, false},
		{"truncated", raft.Log{Type: raft.LogCommand, Data: data, Extensions: ext[:5]}, false},
	}
	for _, c := range cases {
		err := VerifyCommand(&c.l)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrChecksum)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
