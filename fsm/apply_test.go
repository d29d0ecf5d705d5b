package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_NonCommandEntriesAdvanceIndex: configuration and other non-command
// entries answer nil and move the applied index, durably.
func Test_NonCommandEntriesAdvanceIndex(t *testing.T) {
	h := newHarness(t)
	h.enqueue(at(0), nt("q", "t", 0))
	before := stateHash(t, h.f)
	for _, typ := range []raft.LogType{raft.LogConfiguration, raft.LogNoop, raft.LogBarrier} {
		h.index++
		if out := h.f.Apply(&raft.Log{Index: h.index, Type: typ, Data: []byte("x")}); out != nil {
			t.Fatalf("%v answered %v", typ, out)
		}
		if h.f.AppliedIndex() != h.index {
			t.Fatalf("%v: applied %d, want %d", typ, h.f.AppliedIndex(), h.index)
		}
	}
	if stateHash(t, h.f) != before {
		t.Fatal("non-command entries changed the state")
	}
	h.reopen()
	if h.f.AppliedIndex() != h.index {
		t.Fatalf("after reopen applied %d, want %d", h.f.AppliedIndex(), h.index)
	}
}

// Test_UndecodableEntryStopsTheNode: an entry this build cannot read
// panics rather than be skipped (skipping would diverge), and commits
// nothing of its batch.
func Test_UndecodableEntryStopsTheNode(t *testing.T) {
	cases := map[string][]byte{
		"garbage":      {0xff, 0xff, 0xff},
		"unknown type": mustEncode(t, &pb.Command{Type: 99, Now: at(0)}),
		"no type":      mustEncode(t, &pb.Command{Now: at(0)}),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.enqueue(at(0), nt("q", "t", 0))
			before, applied := mustHash(t, h.f), h.f.AppliedIndex()
			good := entry(t, applied+1, enqueueCmd(at(0), nt("q", "t", 0)))
			bad := &raft.Log{Index: applied + 2, Type: raft.LogCommand, Data: data}
			panicked := func() (p any) {
				defer func() { p = recover() }()
				h.f.ApplyBatch([]*raft.Log{good, bad})
				return nil
			}()
			if panicked == nil {
				t.Fatal("ApplyBatch went on past an undecodable entry")
			}
			if got := fmt.Sprint(panicked); len(got) == 0 {
				t.Fatal("empty panic message")
			}
			if mustHash(t, h.f) != before || h.f.AppliedIndex() != applied {
				t.Fatal("a batch with an undecodable entry was partly committed")
			}
		})
	}
}

// Test_HasDueAndExpiredLeases: the leader's probes see due work exactly at
// its time, and ExpiredLeases honours its limit, oldest first.
func Test_HasDueAndExpiredLeases(t *testing.T) {
	h := newHarness(t)
	delayed := nt("q", "t", 0)
	delayed.DelayNs = int64(time.Minute)
	h.enqueue(at(0), delayed, nt("q", "t", 0), nt("q", "t", 0), nt("q", "t", 0))
	if d, e, err := h.f.HasDue(at(time.Minute) - 1); err != nil || d || e {
		t.Fatalf("HasDue 1ns early = %v, %v, %v", d, e, err)
	}
	if d, _, _ := h.f.HasDue(at(time.Minute)); !d {
		t.Fatal("HasDue misses a delayed task at its time")
	}
	var claimed []*pb.Task
	for i := 0; i < 3; i++ {
		claimed = append(claimed, h.claimOne(at(time.Duration(i)*time.Second), "q", "t"))
	}
	items, err := h.f.ExpiredLeases(at(time.Hour), 2)
	if err != nil || len(items) != 2 {
		t.Fatalf("ExpiredLeases limit 2 = %v, %v", items, err)
	}
	for i, it := range items {
		if it.GetTaskId() != claimed[i].GetId() || it.GetFence() != claimed[i].GetFence() {
			t.Fatalf("item %d = %v, want %s@%d", i, it, claimed[i].GetId(), claimed[i].GetFence())
		}
	}
}
