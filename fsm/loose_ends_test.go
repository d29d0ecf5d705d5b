package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// Test_ApplyPanicClosesBatch: an apply that panics (here an undecodable
// entry) closes its Pebble batch on the way out. Before, the batch was
// left open: its memory (and an indexed batch's skiplist) was never
// returned, on a node whose owner may recover the panic and go on.
func Test_ApplyPanicClosesBatch(t *testing.T) {
	h := newHarness(t)
	h.enqueue(at(0), nt("q", "t", 0))
	var got *pebble.Batch
	newApplyBatch = func(db *pebble.DB) *pebble.Batch {
		got = db.NewIndexedBatch()
		return got
	}
	defer func() { newApplyBatch = (*pebble.DB).NewIndexedBatch }()
	bad := &raft.Log{Index: h.f.AppliedIndex() + 1, Type: raft.LogCommand, Data: []byte{0xff, 0xff}}
	p := func() (p any) {
		defer func() { p = recover() }()
		h.f.ApplyBatch([]*raft.Log{bad})
		return nil
	}()
	if p == nil || got == nil {
		t.Fatalf("panic %v, batch %v: want a panic from an apply batch", p, got)
	}
	// Close hands an indexed batch back to Pebble's pool without its
	// index; an open one still has it.
	if got.Indexed() {
		t.Fatal("the panicked apply's batch was left open")
	}
}

// Test_RestoreWakesObserver: a restore replaces the whole keyspace, so
// the observer gets an Event saying so: long polls and WaitResult calls
// that wait on this node look again. Before, a restore that made work
// claimable or finished a task woke nobody until an unrelated apply.
func Test_RestoreWakesObserver(t *testing.T) {
	src := newHarness(t)
	src.enqueue(at(0), nt("q", "t", 0))
	snap := mustSnapshot(t, src.f)

	h := newHarness(t)
	var events []Event
	h.f.SetObserver(func(e Event) { events = append(events, e) })
	if err := restoreFrom(h.f, snap); err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || !events[0].Restored || events[0].Index != src.f.AppliedIndex() {
		t.Fatalf("events after restore %+v, want one Restored at index %d", events, src.f.AppliedIndex())
	}
}

// incompressible is n bytes of hex that no block compression shrinks,
// the same for the same i.
func incompressible(i, n int) string {
	var b strings.Builder
	for j := 0; b.Len() < n; j++ {
		sum := sha256.Sum256([]byte(fmt.Sprint(i, "/", j)))
		b.WriteString(hex.EncodeToString(sum[:]))
	}
	return b.String()[:n]
}
