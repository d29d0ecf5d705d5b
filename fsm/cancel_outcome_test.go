package fsm

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// outcomeHarness is a harness whose cluster latched LevelCancelledOutcome.
func outcomeHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.do(latchCmd(LevelCancelledOutcome))
	return h
}

// cancelledClaimOf enqueues a task of q/a, claims it and cancels the
// running claim: the worker holds c, and its next call learns of the
// cancel.
func cancelledClaimOf(t *testing.T, h *harness) *pb.Task {
	t.Helper()
	h.enqueue(at(0), nt("q", "a", 0))
	c := h.claimOne(at(0), "q", "a")
	h.one(cancelCmd(at(time.Second), c.GetId()), pb.Code_CODE_OK)
	return c
}

// wantCancelledOutcome checks a task ended CANCELLED with outcome
// CANCELLED and no result.
func wantCancelledOutcome(t *testing.T, task *pb.Task) {
	t.Helper()
	if task.GetState() != pb.TaskState_TASK_STATE_CANCELLED || task.GetOutcome() != pb.Outcome_OUTCOME_CANCELLED || len(task.GetResult()) != 0 {
		t.Fatalf("task %s: state %v outcome %v result %q, want CANCELLED, CANCELLED and none",
			task.GetId(), task.GetState(), task.GetOutcome(), task.GetResult())
	}
}

// Test_CancelledOutcomeRules is the table of LevelCancelledOutcome: a
// Submit under a claim that Cancel reached is answered CANCELLED and
// keeps nothing, and every task that ends CANCELLED has outcome
// CANCELLED, so a WaitResult reader never sees COMPLETED on it.
func Test_CancelledOutcomeRules(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"submit completed after cancel is answered cancelled and keeps nothing", func(t *testing.T, h *harness) {
			c := cancelledClaimOf(t, h)
			it := h.one(submitCmd(at(2*time.Second), c.GetId(), c.GetFence(), pb.Outcome_OUTCOME_COMPLETED, "ok"), pb.Code_CODE_CANCELLED)
			if it.GetState() != pb.TaskState_TASK_STATE_CANCELLED || it.GetFence() != 0 || it.GetSinceNs() != int64(2*time.Second) {
				t.Fatalf("submit answered %v", it)
			}
			task := h.task(c.GetId())
			wantCancelledOutcome(t, task)
			wantEnded(t, task, pb.TaskState_TASK_STATE_CANCELLED, pb.AttemptOutcome_ATTEMPT_OUTCOME_CANCELLED)
			if !strings.Contains(task.GetLastError(), "submitted completed") {
				t.Fatalf("last_error %q does not say how the claim ended", task.GetLastError())
			}
			if s := h.stats("q", "a"); s.GetRunning() != 0 || s.GetTotals().GetCancelled() != 1 || s.GetTotals().GetCompleted() != 0 {
				t.Fatalf("stats after the cancelled submit %v", s)
			}
			// The same Submit again (a retry after a lost answer) hears the
			// same, and changes nothing.
			h.one(submitCmd(at(3*time.Second), c.GetId(), c.GetFence(), pb.Outcome_OUTCOME_COMPLETED, "ok"), pb.Code_CODE_CANCELLED)
			if got := h.task(c.GetId()); !proto.Equal(got, task) {
				t.Fatalf("the repeated submit changed the task:\n%v\nwas\n%v", got, task)
			}
		}},
		{"submit failed after cancel is answered cancelled", func(t *testing.T, h *harness) {
			c := cancelledClaimOf(t, h)
			cmd := submitCmd(at(2*time.Second), c.GetId(), c.GetFence(), pb.Outcome_OUTCOME_FAILED, "")
			cmd.GetSubmit().Error = "boom"
			h.one(cmd, pb.Code_CODE_CANCELLED)
			task := h.task(c.GetId())
			wantCancelledOutcome(t, task)
			if !strings.Contains(task.GetLastError(), "boom") {
				t.Fatalf("last_error %q lost the worker's error", task.GetLastError())
			}
		}},
		{"nack after cancel: outcome cancelled, and a later submit hears it", func(t *testing.T, h *harness) {
			c := cancelledClaimOf(t, h)
			h.one(nackCmd(at(2*time.Second), c.GetId(), c.GetFence(), 0, "context canceled"), pb.Code_CODE_OK)
			wantCancelledOutcome(t, h.task(c.GetId()))
			h.one(completeCmd(at(3*time.Second), c.GetId(), c.GetFence()), pb.Code_CODE_CANCELLED)
			h.one(nackCmd(at(3*time.Second), c.GetId(), c.GetFence(), 0, "again"), pb.Code_CODE_STALE_FENCE)
		}},
		{"lease expiry after cancel: a late submit hears cancelled", func(t *testing.T, h *harness) {
			c := cancelledClaimOf(t, h)
			h.one(reapCmd(at(time.Minute), &pb.ReapItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_OK)
			wantCancelledOutcome(t, h.task(c.GetId()))
			h.one(completeCmd(at(2*time.Minute), c.GetId(), c.GetFence()), pb.Code_CODE_CANCELLED)
		}},
		{"cancel of a pending task: outcome cancelled; an earlier claim's submit stays stale", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			h.one(nackCmd(at(time.Second), c.GetId(), c.GetFence(), 0, "retry"), pb.Code_CODE_OK)
			h.one(cancelCmd(at(2*time.Second), c.GetId()), pb.Code_CODE_OK)
			wantCancelledOutcome(t, h.task(c.GetId()))
			// That claim ended by its own Nack, before any cancel: neither
			// done nor cancelled, only stale.
			h.one(completeCmd(at(3*time.Second), c.GetId(), c.GetFence()), pb.Code_CODE_STALE_FENCE)
		}},
		{"a child cancelled by its parent's failure has outcome cancelled", func(t *testing.T, h *harness) {
			ids := h.enqueue(at(0), nt("q", "a", 0), after(nil, 0))
			h.finish(at(time.Second), ids[0], pb.Outcome_OUTCOME_FAILED)
			wantCancelledOutcome(t, h.wantState(ids[1], pb.TaskState_TASK_STATE_CANCELLED))
			// Enqueued after the parent failed: cancelled at once.
			late := h.enqueue(at(2*time.Second), after(ids[:1]))
			wantCancelledOutcome(t, h.wantState(late[0], pb.TaskState_TASK_STATE_CANCELLED))
		}},
		{"a submit without a cancel is unchanged", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			h.one(submitCmd(at(time.Second), c.GetId(), c.GetFence(), pb.Outcome_OUTCOME_COMPLETED, "ok"), pb.Code_CODE_OK)
			task := h.task(c.GetId())
			if task.GetState() != pb.TaskState_TASK_STATE_COMPLETED || task.GetOutcome() != pb.Outcome_OUTCOME_COMPLETED || string(task.GetResult()) != "ok" {
				t.Fatalf("completed task %v", task)
			}
			h.one(completeCmd(at(2*time.Second), c.GetId(), c.GetFence()), pb.Code_CODE_ALREADY_DONE)
		}},
		{"another tenant's submit is not found, cancelled claim or not", func(t *testing.T, h *harness) {
			c := cancelledClaimOf(t, h)
			cmd := completeCmd(at(2*time.Second), c.GetId(), c.GetFence())
			cmd.GetSubmit().Tenant = "b"
			h.one(cmd, pb.Code_CODE_NOT_FOUND)
			if h.task(c.GetId()).GetState() != pb.TaskState_TASK_STATE_RUNNING {
				t.Fatal("another tenant's submit ended the task")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := outcomeHarness(t)
			c.run(t, h)
			checkKeyspace(t, h.f)
		})
	}
}

// Test_CancelledOutcomeWaitsForItsLevel: before the latch a Submit after a
// cancel is OK and keeps the worker's outcome and result, and apply writes
// exactly what a build of the level before writes, byte for byte.
func Test_CancelledOutcomeWaitsForItsLevel(t *testing.T) {
	newer := newHarness(t)
	older := &harness{t: t, dir: t.TempDir(), opts: Options{MaxLevel: LevelIdentity}}
	older.f = mustOpen(t, older.dir, older.opts)
	var c *pb.Task
	for _, h := range []*harness{newer, older} {
		h.do(latchCmd(LevelIdentity))
		c = cancelledClaimOf(t, h)
		h.one(submitCmd(at(2*time.Second), c.GetId(), c.GetFence(), pb.Outcome_OUTCOME_COMPLETED, "ok"), pb.Code_CODE_OK)
		h.one(completeCmd(at(3*time.Second), c.GetId(), c.GetFence()), pb.Code_CODE_ALREADY_DONE)
		p := h.enqueue(at(4*time.Second), nt("q", "a", 0))
		h.one(cancelCmd(at(5*time.Second), p[0]), pb.Code_CODE_OK)
	}
	if a, b := mustHash(t, newer.f), mustHash(t, older.f); a != b {
		t.Fatalf("before the latch the keyspaces differ: %s vs %s", a, b)
	}
	task := newer.task(c.GetId())
	if task.GetState() != pb.TaskState_TASK_STATE_CANCELLED || task.GetOutcome() != pb.Outcome_OUTCOME_COMPLETED || string(task.GetResult()) != "ok" {
		t.Fatalf("before the latch: %v", task)
	}
}
