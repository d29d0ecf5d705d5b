package fsm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// A claim whose answer needs a body kept in a damaged blob file panicked
// apply, and every restart replayed the claim into the same panic. Now
// apply answers the error, stops applying, leaves the damage marker, and
// the next open refuses, naming the repair.
func Test_DamagedBlobStopsApplyWithoutPanic(t *testing.T) {
	h := newHarness(t)
	h.opts.NoCompactions = true // the claim, not a compaction, must meet the damage
	h.reopen()
	// The build's level, as a cluster runs: the body is written apart from
	// the record (v/), which Open does not read.
	h.do(latchCmd(FeatureLevel))
	var faults []error
	h.opts.OnLogFault = func(err error) { faults = append(faults, err) }
	big := nt("q", "a", 0)
	big.Payload = bytes.Repeat([]byte("b"), 128<<10)
	h.enqueue(at(0), big)
	h.reopen() // Close flushes: the body now sits in a blob file
	blobs, err := filepath.Glob(filepath.Join(h.dir, storage.DBDir, "*.blob"))
	if err != nil || len(blobs) == 0 {
		t.Fatalf("no blob file under %s: %v", h.dir, err)
	}
	flipMiddle(t, blobs[0])

	var res any
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("apply panicked on a damaged body: %v", p)
			}
		}()
		h.index++
		res = h.f.Apply(entry(t, h.index, claimCmd(at(1), "q", "a", "w1", lease, 1)))
	}()
	if err, ok := res.(error); !ok || !errors.Is(err, storage.ErrDamaged) {
		t.Fatalf("claim of a damaged body answered %v, want ErrDamaged", res)
	}
	if len(faults) != 1 || !errors.Is(faults[0], storage.ErrDamaged) {
		t.Fatalf("faults reported: %v, want one ErrDamaged", faults)
	}
	if res := h.f.Apply(entry(t, h.index+1, enqueueCmd(at(2), nt("q", "a", 0)))); !errors.Is(res.(error), storage.ErrDamaged) {
		t.Fatalf("an entry after the damage answered %v, want the fault", res)
	}
	if got := h.f.AppliedIndex(); got != h.index-1 {
		t.Fatalf("applied index %d after the damage, want %d", got, h.index-1)
	}
	if err := h.f.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	_, err = Open(h.dir, h.opts)
	if !errors.Is(err, storage.ErrDamaged) || !strings.Contains(err.Error(), "--join") {
		t.Fatalf("open after the damage: %v, want ErrDamaged naming the repair", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("the refusal spans lines: %q", err)
	}
}

// flipMiddle inverts 64 bytes in the middle of path, inside a value.
func flipMiddle(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(b) / 2; i < len(b)/2+64; i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A check's hash (and a snapshot streamed to a follower) reads every
// value. On a damaged body it failed at every check round and left the
// node waiting on the check; now it stops the node as apply does.
func Test_DamagedBlobStopsCheckHash(t *testing.T) {
	h := newHarness(t)
	h.opts.NoCompactions = true
	h.do(latchCmd(FeatureLevel)) // the body apart from the record, which Open reads
	big := nt("q", "a", 0)
	big.Payload = bytes.Repeat([]byte("b"), 128<<10)
	h.enqueue(at(0), big)
	h.reopen()
	blobs, _ := filepath.Glob(filepath.Join(h.dir, storage.DBDir, "*.blob"))
	if len(blobs) == 0 {
		t.Fatal("no blob file")
	}
	flipMiddle(t, blobs[0])
	s, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	v := &CheckView{s: s.(*fsmSnapshot)}
	defer v.Release()
	if _, err := v.Hash(); !errors.Is(err, storage.ErrDamaged) {
		t.Fatalf("hash of a damaged keyspace: %v, want ErrDamaged", err)
	}
	if err := h.f.LogFault(); !errors.Is(err, storage.ErrDamaged) {
		t.Fatalf("fault after the hash met damage: %v, want ErrDamaged", err)
	}
	if _, err := os.Stat(filepath.Join(h.dir, storage.DBDir, storage.DamageMarker)); err != nil {
		t.Fatalf("no damage marker: %v", err)
	}
}

// A damaged table that the first compaction after a start meets latches
// the FSM's fault (which the node turns into NOT_SERVING and a Raft
// shutdown) instead of Pebble's panic inside the compaction.
func Test_DamagedTableMetByCompactionLatchesTheFault(t *testing.T) {
	h := newHarness(t)
	h.opts.NoCompactions = true
	h.reopen()
	// Every flush writes m/applied, so the tables overlap and a compaction
	// must read them, not move one down a level.
	// Open reads every task record (the ready order and the idempotency
	// index), but not the bodies: 900-byte ones, kept in the tables, fill
	// the second half of each table's data, where the damage goes, and
	// must be met by the compaction. Split records (LevelSplitRecords)
	// keep the bodies apart from the records.
	h.do(latchCmd(FeatureLevel))
	for round := 0; round < 2; round++ {
		for i := 0; i < 50; i++ {
			task := nt("q", "a", 0)
			task.Payload = []byte(incompressible(round*50+i, 900))
			id := h.enqueue(at(0), task)[0]
			h.finish(at(1), id, pb.Outcome_OUTCOME_COMPLETED)
		}
		h.reopen()
	}
	tables, _ := filepath.Glob(filepath.Join(h.dir, storage.DBDir, "*.sst"))
	if len(tables) < 2 {
		t.Fatalf("tables %v, want two to compact", tables)
	}
	flipMiddle(t, tables[0])
	var fault atomic.Pointer[error]
	h.opts.OnLogFault = func(err error) { fault.Store(&err) }
	h.reopen()
	h.f.mu.RLock()
	db := h.f.db
	h.f.mu.RUnlock()
	ctx, cancel := context.WithCancel(t.Context())
	compacted := make(chan error, 1)
	// Pebble keeps its compactions off a damaged span, so this one waits
	// until cancelled.
	go func() { compacted <- db.Compact(ctx, []byte{0}, []byte{0xff}, true) }()
	testwait.For(t, 10*time.Second, "the fault from the compaction", func() bool { return fault.Load() != nil })
	cancel()
	<-compacted
	if err := *fault.Load(); !errors.Is(err, storage.ErrDamaged) || !strings.Contains(err.Error(), filepath.Base(tables[0])) {
		t.Fatalf("fault %v, want ErrDamaged naming %s", err, tables[0])
	}
	if !errors.Is(h.f.LogFault(), storage.ErrDamaged) {
		t.Fatalf("LogFault %v, want ErrDamaged", h.f.LogFault())
	}
	if _, err := os.Stat(filepath.Join(h.dir, storage.DBDir, storage.DamageMarker)); err != nil {
		t.Fatalf("no damage marker: %v", err)
	}
}

// Open rebuilds the claim order from the records of pending and delayed
// tasks, so a damaged table holding them is met at start: the open
// refuses in one line naming the repair, and so does every later one.
func Test_DamagedPendingRecordRefusesAtOpen(t *testing.T) {
	h := newHarness(t)
	h.opts.NoCompactions = true
	h.do(latchCmd(FeatureLevel))
	for round := 0; round < 2; round++ {
		for i := 0; i < 50; i++ {
			h.enqueue(at(0), nt("q", "a", 0))
		}
		h.reopen()
	}
	tables, _ := filepath.Glob(filepath.Join(h.dir, storage.DBDir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table")
	}
	for _, tb := range tables {
		flipMiddle(t, tb)
	}
	if err := h.f.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	for try := 1; try <= 2; try++ {
		f, err := Open(h.dir, h.opts)
		if err == nil {
			_ = f.Close()
			t.Fatalf("open %d of a keyspace whose pending records are damaged succeeded", try)
		}
		if !errors.Is(err, storage.ErrDamaged) || !strings.Contains(err.Error(), "--join") {
			t.Fatalf("open %d: %v, want ErrDamaged naming the repair", try, err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("open %d: the refusal spans lines: %q", try, err)
		}
	}
}

// A task record that does not decode, though Pebble's checksums hold (a
// key apply never wrote), stops Open's rebuild of the claim order: the
// node refuses as for damage, in one line naming the repair.
func Test_UndecodableRecordRefusesAtOpen(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(FeatureLevel))
	h.enqueue(at(0), nt("q", "a", 0))
	h.f.mu.RLock()
	err := h.f.db.Set([]byte("t/stray"), []byte("not from the log"), pebble.NoSync) // Close flushes
	h.f.mu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(h.dir, h.opts)
	if err == nil {
		_ = f.Close()
		t.Fatal("open of a keyspace with an undecodable task record succeeded")
	}
	if !errors.Is(err, storage.ErrDamaged) || !strings.Contains(err.Error(), "--join") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("open: %q, want one line of ErrDamaged naming the repair", err)
	}
}
