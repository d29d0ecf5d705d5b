package fsm

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// totalsWorkload drives every counted transition once or more on q/t:
// 6 enqueued (one delayed), 5 claims, a completion, a failure, a cancel,
// a nack, an expired lease, a dead letter and its requeue.
func totalsWorkload(h *harness) {
	h.t.Helper()
	ids := h.enqueue(t0, nt("q", "t", 0), nt("q", "t", 0), nt("q", "t", 0), nt("q", "t", 0))
	late := nt("q", "t", 0)
	late.RunAt = at(time.Hour)
	h.enqueue(t0, late)
	dies := nt("q", "t", 0)
	dies.MaxAttempts = 1
	h.enqueue(t0, dies)
	h.one(cancelCmd(t0, ids[3]), pb.Code_CODE_OK) // pending → cancelled
	tasks := h.claim(t0, "q", "t", 4)             // ids[0..2] and dies
	if len(tasks) != 4 {
		h.t.Fatalf("claimed %d, want 4", len(tasks))
	}
	byID := map[string]*pb.Task{}
	for _, t := range tasks {
		byID[t.GetId()] = t
	}
	h.one(completeCmd(at(time.Second), ids[0], byID[ids[0]].GetFence()), pb.Code_CODE_OK)
	h.one(submitCmd(at(time.Second), ids[1], byID[ids[1]].GetFence(), pb.Outcome_OUTCOME_FAILED, "no"), pb.Code_CODE_OK)
	h.one(nackCmd(at(time.Second), ids[2], byID[ids[2]].GetFence(), 0, "retry"), pb.Code_CODE_OK) // running → pending
	again := h.claimOne(at(2*time.Second), "q", "t")                                              // ids[2], claim 5
	var dead string
	for id, t := range byID {
		if t.GetMaxAttempts() == 1 {
			dead = id
			h.one(nackCmd(at(time.Second), id, t.GetFence(), 0, "boom"), pb.Code_CODE_OK) // → dead
		}
	}
	h.one(reapCmd(at(time.Minute), &pb.ReapItem{TaskId: again.GetId(), Fence: again.GetFence()}), pb.Code_CODE_OK) // expired → pending
	h.one(requeueDeadCmd(at(time.Minute), dead, "", "", 0), pb.Code_CODE_OK)                                       // dead → pending
}

// Test_QueueTotalsCountEveryTransition: once the cluster latched
// LevelCounters, each queue's catalog record counts its transitions.
func Test_QueueTotalsCountEveryTransition(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(LevelCounters))
	totalsWorkload(h)
	want := &pb.QueueTotals{Enqueued: 6, Claimed: 5, Completed: 1, Failed: 1, Cancelled: 1, DeadLettered: 1,
		Requeued: 3, LeaseExpired: 1}
	if got := h.stats("q", "t").GetTotals(); !proto.Equal(want, got) {
		t.Fatalf("totals %v, want %v", got, want)
	}
	h.reopen()
	if got := h.stats("q", "t").GetTotals(); !proto.Equal(want, got) {
		t.Fatalf("totals after reopen %v, want %v", got, want)
	}
}

// Test_TotalsWaitForTheirLevel: until LevelCounters is latched, a build
// that has totals writes exactly the bytes a build without them writes
// (same keyspace hash as a MaxLevel-4 FSM on the same log), so replicas of
// both kinds agree during a rolling upgrade.
func Test_TotalsWaitForTheirLevel(t *testing.T) {
	newer := newHarness(t)
	older := &harness{t: t, dir: t.TempDir(), opts: Options{MaxLevel: LevelTokens}}
	older.f = mustOpen(t, older.dir, older.opts)
	for _, h := range []*harness{newer, older} {
		h.do(latchCmd(LevelTokens))
		totalsWorkload(h)
	}
	if a, b := mustHash(t, newer.f), mustHash(t, older.f); a != b {
		t.Fatalf("before the latch the keyspaces differ: %s vs %s", a, b)
	}
	if got := newer.stats("q", "t").GetTotals(); got != nil {
		t.Fatalf("totals before the latch: %v", got)
	}
	newer.do(latchCmd(LevelCounters))
	newer.enqueue(at(time.Hour), nt("q", "t", 0))
	if got := newer.stats("q", "t").GetTotals(); got.GetEnqueued() != 1 {
		t.Fatalf("totals after the latch: %v, want one enqueue counted from the latch on", got)
	}
}

// Test_AnswersSayHowLongTheClaimWasHeld: the leader's lease histograms
// read since_ns from the answers, computed from the entry's time.
func Test_AnswersSayHowLongTheClaimWasHeld(t *testing.T) {
	h := newHarness(t)
	h.enqueue(t0, nt("q", "t", 0), nt("q", "t", 0))
	tasks := h.claim(at(time.Second), "q", "t", 2)
	a, b := tasks[0], tasks[1]
	if it := h.one(heartbeatCmd(at(4*time.Second), &pb.HeartbeatItem{TaskId: a.GetId(), Fence: a.GetFence()}), pb.Code_CODE_OK); it.GetSinceNs() != int64(3*time.Second) {
		t.Fatalf("first heartbeat since %v, want 3s after the claim", time.Duration(it.GetSinceNs()))
	}
	if it := h.one(heartbeatCmd(at(6*time.Second), &pb.HeartbeatItem{TaskId: a.GetId(), Fence: a.GetFence()}), pb.Code_CODE_OK); it.GetSinceNs() != int64(2*time.Second) {
		t.Fatalf("second heartbeat since %v, want 2s", time.Duration(it.GetSinceNs()))
	}
	if it := h.one(completeCmd(at(11*time.Second), a.GetId(), a.GetFence()), pb.Code_CODE_OK); it.GetSinceNs() != int64(10*time.Second) {
		t.Fatalf("submit since %v, want 10s after the claim", time.Duration(it.GetSinceNs()))
	}
	if it := h.one(nackCmd(at(3*time.Second), b.GetId(), b.GetFence(), 0, "x"), pb.Code_CODE_OK); it.GetSinceNs() != int64(10*time.Second) {
		// The leader's time never runs backwards: the nack runs at 11s.
		t.Fatalf("nack since %v, want 10s (time in the log only rises)", time.Duration(it.GetSinceNs()))
	}
}
