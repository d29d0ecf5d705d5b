package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_PurgeFailsOnIdemReadError: a purge whose read of the task's
// idempotency key fails with anything but not-found must fail the apply.
// Before, it skipped the delete and committed: this replica kept a key
// that replicas whose read worked deleted, and their keyspaces diverged.
//
// The layout makes the Get of that key the purge's only disk read: the
// key is flushed to an sstable between 10 KiB of other queues' keys on
// each side, so it has a data block that nothing read before (the scan of
// the expiry index ends in an earlier block, the claim's reads are in
// later ones), while the task record and its expiry key are in the
// memtable.
func Test_PurgeFailsOnIdemReadError(t *testing.T) {
	var on atomic.Bool
	fail := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if on.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsRead && strings.HasSuffix(op.Path, ".sst") {
			return errorfs.ErrInjected
		}
		return nil
	})
	h := &harness{t: t, dir: "/fsm", opts: Options{FS: errorfs.Wrap(vfs.NewMem(), fail), IdemFilterBytes: -1}}
	h.f = mustOpen(t, h.dir, h.opts)
	for _, q := range []string{"a", "zz"} { // around i/z/t/order-42
		for i := range 40 {
			y := nt(q, "t", 0)
			y.IdempotencyKey = incompressible(i, MaxIdemKeyLen)
			h.enqueue(at(0), y)
		}
	}
	x := nt("z", "t", 0)
	x.IdempotencyKey = "order-42"
	x.RetentionNs = int64(time.Minute)
	id := h.enqueue(at(0), x)[0]
	if err := h.f.db.Flush(); err != nil {
		t.Fatal(err)
	}
	c := h.claimOne(at(0), "z", "t")
	h.one(completeCmd(at(time.Second), id, c.GetFence()), pb.Code_CODE_OK)
	if res := h.do(purgeCmd(at(2*time.Second), 10)); len(res.GetItems()) != 0 {
		t.Fatalf("purged %v before the retention ended", res.GetItems())
	}
	applied := h.f.AppliedIndex() // no hash here: it would cache every block

	on.Store(true)
	p := func() (p any) {
		defer func() { p = recover() }()
		h.apply(purgeCmd(at(time.Hour), 10))
		return nil
	}()
	on.Store(false)
	if p == nil {
		t.Fatal("purge with a failing idempotency-key read applied; it must fail the apply")
	}
	if msg := fmt.Sprint(p); !strings.Contains(msg, "idempotency key") || !strings.Contains(msg, "injected") {
		t.Fatalf("purge failed elsewhere than reading the idempotency key: %s", msg)
	}
	if _, err := h.f.GetTask(id); err != nil || h.f.AppliedIndex() != applied {
		t.Fatalf("a purge that failed was partly committed: task %v, applied %d → %d", err, applied, h.f.AppliedIndex())
	}
}

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
