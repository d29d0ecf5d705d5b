package fsm

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Test_CheckpointWindowKeepsTheKeyspace applies the metamorphic log to a
// replica that checkpoints every few entries, in random batch sizes: the
// same answers and the same hash as the replica that commits every
// segment, and after a reopen the same again. A window changes when Pebble
// is written, never what.
func Test_CheckpointWindowKeepsTheKeyspace(t *testing.T) {
	seed := *seedFlag
	a := newHarness(t)
	logs, want := generate(t, a.f, seed, metamorphicOps()/2, nil)
	hashA := mustHash(t, a.f)
	// A small record cache sends claims of many heads to the prefetch,
	// which must leave the window's heads to getTask.
	for _, window := range []int{2, 37, 1000} {
		w := &harness{t: t, dir: t.TempDir(), opts: Options{CheckpointEntries: window, CheckpointBytes: 64 << 10, RecentRecordBytes: 4 << 10}}
		w.f = mustOpen(t, w.dir, w.opts)
		got := applyInBatches(w.f, logs, rand.New(rand.NewPCG(seed, uint64(window))), 64)
		for i := range logs {
			if !answersEqual(want[i], got[i]) {
				t.Fatalf("window %d, entry %d (%v): answers differ\nper segment: %v\nwindowed:    %v", window, logs[i].Index, logs[i].Type, want[i], got[i])
			}
		}
		if w.f.Checkpoints() < 2 {
			t.Fatalf("window %d: %d checkpoints; the test wants windows that end", window, w.f.Checkpoints())
		}
		if h := mustHash(t, w.f); h != hashA {
			t.Fatalf("window %d: hash %s, per segment %s", window, h, hashA)
		}
		checkKeyspace(t, w.f)
		w.reopen()
		if h := mustHash(t, w.f); h != hashA || w.f.AppliedIndex() != a.f.AppliedIndex() {
			t.Fatalf("window %d reopened: hash %s at %d, want %s at %d", window, h, w.f.AppliedIndex(), hashA, a.f.AppliedIndex())
		}
	}
}

// Test_CheckpointWindowReadsSeeEveryApply: a read outside apply sees every
// entry whose answer was given, although the window has not reached its
// size. A point read looks through the window and leaves it open (every
// call's authentication is one); a read that iterates checkpoints first.
func Test_CheckpointWindowReadsSeeEveryApply(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir(), opts: Options{CheckpointEntries: 1 << 20}}
	h.f = mustOpen(t, h.dir, h.opts)
	ids := h.enqueue(1, nt("q", "t", 0))
	task, err := h.f.GetTask(ids[0])
	if err != nil {
		t.Fatalf("GetTask after enqueue: %v", err)
	}
	if task.GetState() != pb.TaskState_TASK_STATE_PENDING {
		t.Fatalf("state %v, want PENDING", task.GetState())
	}
	h.do(claimCmd(2, "q", "t", "w", time.Minute, 1))
	task, err = h.f.GetTask(ids[0])
	if err != nil || task.GetState() != pb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("after claim: %v, %v", task.GetState(), err)
	}
	if n := h.f.Checkpoints(); n != 0 {
		t.Fatalf("%d checkpoints after point reads, want 0", n)
	}
	tasks, _, err := h.f.ListTasks("q", "t", pb.TaskState_TASK_STATE_RUNNING, "", 10)
	if err != nil || len(tasks) != 1 || tasks[0].GetId() != ids[0] {
		t.Fatalf("running tasks %v, %v; want %s", tasks, err, ids[0])
	}
	if n := h.f.Checkpoints(); n != 1 {
		t.Fatalf("%d checkpoints after a listing, want 1", n)
	}
}

// Test_CheckpointWindowPrefetchLeavesItsHeads: a claim's prefetch reads
// the batch and Pebble, which hold a head's record as of the last
// checkpoint; a head the window changed since (here its priority) must be
// read from the window, or the claim answers the old record.
func Test_CheckpointWindowPrefetchLeavesItsHeads(t *testing.T) {
	off := Options{RecentRecordBytes: -1}
	on := Options{CheckpointEntries: 1 << 20, RecentRecordBytes: 4 << 10}
	a := &harness{t: t, dir: t.TempDir(), opts: off}
	a.f = mustOpen(t, a.dir, off)
	b := &harness{t: t, dir: t.TempDir(), opts: on}
	b.f = mustOpen(t, b.dir, on)
	a.do(latchCmd(FeatureLevel))
	b.do(latchCmd(FeatureLevel))
	ids := enqueueBoth(t, a, b, "q", 200)
	mustHash(t, b.f) // an iterating read checkpoints: Pebble holds them all
	if n := b.f.Checkpoints(); n != 1 {
		t.Fatalf("%d checkpoints, want 1", n)
	}
	for _, id := range ids {
		a.do(updateTaskCmd(at(time.Second), id, 5, 0))
		b.do(updateTaskCmd(at(time.Second), id, 5, 0))
	}
	enqueueBoth(t, a, b, "r", 400) // pushes the updated records out of the small cache
	// The claim's first and last heads are not in the cache, so it goes
	// to the prefetch, which must find every head in the window.
	b.f.mu.RLock()
	c := b.f.recent
	b.f.mu.RUnlock()
	if c.has(storage.TaskKey(ids[0])) || c.has(storage.TaskKey(ids[99])) {
		t.Fatal("the cache holds the claim's ends: the test wants heads the cache lost")
	}
	if n := claimBoth(t, a, b, at(2*time.Second), 100); n != 100 {
		t.Fatalf("claimed %d, want 100", n)
	}
	if ha, hb := mustHash(t, a.f), mustHash(t, b.f); ha != hb {
		t.Fatalf("hash %s in a window, %s without", hb, ha)
	}
}

// Test_CheckpointWindowTokenReads: a token created inside a window is
// found, and a revoked one is gone, by the point read every call's
// authentication makes, without ending the window; the read looks at
// Pebble alone only for families the window did not write.
func Test_CheckpointWindowTokenReads(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir(), opts: Options{CheckpointEntries: 1 << 20}}
	h.f = mustOpen(t, h.dir, h.opts)
	h.enqueue(1, nt("q", "t", 0))
	if _, err := h.f.TokenByHash(HashSecret("s")); !errors.Is(err, pb.ErrNotFound) {
		t.Fatalf("before the token: %v, want ErrNotFound", err)
	}
	h.do(createTokenCmd(at(time.Minute), "acc", "s", 0, false))
	if tok, err := h.f.TokenByHash(HashSecret("s")); err != nil || tok.GetAccessor() != "acc" {
		t.Fatalf("token created in the window: %v, %v", tok, err)
	}
	h.do(revokeTokenCmd(at(2*time.Minute), "acc"))
	if _, err := h.f.TokenByHash(HashSecret("s")); !errors.Is(err, pb.ErrNotFound) {
		t.Fatalf("token revoked in the window: %v, want ErrNotFound", err)
	}
	if n := h.f.Checkpoints(); n != 0 {
		t.Fatalf("%d checkpoints after point reads, want 0", n)
	}
}

// Test_CheckpointWindowFailedSegmentLatchesAFault: an apply that panics
// inside a window that held entries leaves their effects nowhere but in
// memory it cannot trust, so the FSM latches a fault and applies nothing
// more, rather than go on from a Pebble that lacks them.
func Test_CheckpointWindowFailedSegmentLatchesAFault(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir(), opts: Options{CheckpointEntries: 1 << 20}}
	h.f = mustOpen(t, h.dir, h.opts)
	h.enqueue(1, nt("q", "t", 0))
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("an undecodable entry did not panic")
			}
		}()
		h.index++
		h.f.Apply(&raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: []byte{0xff, 0xff, 0xff}})
	}()
	if err := h.f.LogFault(); !errors.Is(err, errWindowLost) {
		t.Fatalf("fault %v, want errWindowLost", err)
	}
	h.index++
	if out := h.f.Apply(entry(t, h.index, enqueueCmd(2, nt("q", "t", 0)))); !errors.Is(out.(error), errWindowLost) {
		t.Fatalf("an entry after the fault answered %v", out)
	}
}
