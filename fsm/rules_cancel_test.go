package fsm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// cancelHarness is a harness whose cluster latched LevelCancelRunning, as
// a leader does before it proposes TimeOut or a timeout_ns.
func cancelHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.do(latchCmd(LevelCancelRunning))
	return h
}

// timed is a task of q/a with an execution timeout.
func timed(timeout time.Duration, retry bool) *pb.NewTask {
	n := nt("q", "a", 0)
	n.TimeoutNs, n.RetryOnTimeout = int64(timeout), retry
	return n
}

// lastAttempt is the task's last attempt record.
func lastAttempt(t *testing.T, task *pb.Task) *pb.Attempt {
	t.Helper()
	h := task.GetHistory()
	if len(h) == 0 {
		t.Fatalf("task %s has no attempt record", task.GetId())
	}
	return h[len(h)-1]
}

// wantEnded checks a task's state and its last attempt's outcome.
func wantEnded(t *testing.T, task *pb.Task, state pb.TaskState, out pb.AttemptOutcome) {
	t.Helper()
	if task.GetState() != state {
		t.Fatalf("task %s is %v (%s), want %v", task.GetId(), task.GetState(), task.GetLastError(), state)
	}
	if a := lastAttempt(t, task); a.GetOutcome() != out || a.GetEndedAt() == 0 {
		t.Fatalf("last attempt %v, want outcome %v and an end", a, out)
	}
}

// Test_CancelRunningRules is the table of cancelling running work and the
// execution timeout: each case runs steps on a fresh FSM latched at
// LevelCancelRunning and checks answers, records and the keyspace.
func Test_CancelRunningRules(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"cancel pending and delayed ends them", func(t *testing.T, h *harness) {
			d := nt("q", "a", 0)
			d.DelayNs = int64(time.Hour)
			ids := h.enqueue(at(0), nt("q", "a", 0), d)
			for _, id := range ids {
				it := h.one(cancelCmd(at(time.Second), id), pb.Code_CODE_OK)
				if it.GetState() != pb.TaskState_TASK_STATE_CANCELLED || it.GetCancelRequested() {
					t.Fatalf("cancel of a waiting task answered %v", it)
				}
				h.one(cancelCmd(at(time.Second), id), pb.Code_CODE_ALREADY_DONE)
			}
		}},
		{"cancel running marks it; a second is already done", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			if c.GetCancelRequested() {
				t.Fatal("a claim's answer says cancel requested")
			}
			it := h.one(cancelCmd(at(time.Second), c.GetId()), pb.Code_CODE_OK)
			if !it.GetCancelRequested() || it.GetState() != pb.TaskState_TASK_STATE_RUNNING || !strings.Contains(it.GetDetail(), "requested") {
				t.Fatalf("cancel of a running task answered %v", it)
			}
			if it.GetFence() != 0 {
				t.Fatal("the cancel's answer shows the worker's fence")
			}
			task := h.task(c.GetId())
			if !task.GetCancelRequested() || task.GetCancelRequestedAt() != at(time.Second) || lastAttempt(t, task).GetCancelRequestedAt() != at(time.Second) {
				t.Fatalf("record after the request: %v", task)
			}
			again := h.one(cancelCmd(at(2*time.Second), c.GetId()), pb.Code_CODE_ALREADY_DONE)
			if !again.GetCancelRequested() {
				t.Fatalf("second cancel answered %v", again)
			}
			if got := h.task(c.GetId()).GetCancelRequestedAt(); got != at(time.Second) {
				t.Fatalf("the second cancel moved the request time to %d", got)
			}
		}},
		{"heartbeat tells the worker, and keeps the lease", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			hb := &pb.HeartbeatItem{TaskId: c.GetId(), Fence: c.GetFence()}
			if it := h.one(heartbeatCmd(at(time.Second), hb), pb.Code_CODE_OK); it.GetCancelRequested() {
				t.Fatal("heartbeat says cancel requested before any cancel")
			}
			h.one(cancelCmd(at(2*time.Second), c.GetId()), pb.Code_CODE_OK)
			it := h.one(heartbeatCmd(at(3*time.Second), hb), pb.Code_CODE_OK)
			if !it.GetCancelRequested() {
				t.Fatalf("heartbeat after the cancel answered %v", it)
			}
			if got := h.task(c.GetId()).GetLeaseUntil(); got != at(3*time.Second+lease) {
				t.Fatalf("lease %d, want it extended to %d", got, at(3*time.Second+lease))
			}
		}},
		{"nack after cancel ends it cancelled, attempts left or not", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			h.one(cancelCmd(at(time.Second), c.GetId()), pb.Code_CODE_OK)
			it := h.one(nackCmd(at(2*time.Second), c.GetId(), c.GetFence(), time.Second, "context canceled"), pb.Code_CODE_OK)
			if it.GetState() != pb.TaskState_TASK_STATE_CANCELLED {
				t.Fatalf("nack answered %v", it)
			}
			task := h.task(c.GetId())
			wantEnded(t, task, pb.TaskState_TASK_STATE_CANCELLED, pb.AttemptOutcome_ATTEMPT_OUTCOME_CANCELLED)
			if task.GetExpireAt() == 0 || task.GetAttempts() != 0 || !strings.Contains(task.GetLastError(), "context canceled") {
				t.Fatalf("cancelled record %v", task)
			}
			if s := h.stats("q", "a"); s.GetRunning() != 0 || s.GetPending()+s.GetDelayed() != 0 || s.GetTotals().GetCancelled() != 1 {
				t.Fatalf("stats after the cancelled nack %v", s)
			}
			if got := h.claim(at(time.Hour), "q", "a", 1); len(got) != 0 {
				t.Fatal("a cancelled task was claimed again")
			}
			h.one(nackCmd(at(3*time.Second), c.GetId(), c.GetFence(), 0, "again"), pb.Code_CODE_STALE_FENCE)
			// A Submit after the Nack did not win: it is stale, not done.
			h.one(completeCmd(at(3*time.Second), c.GetId(), c.GetFence()), pb.Code_CODE_STALE_FENCE)
		}},
		{"a cancelled nack's error stays within MaxErrorLen", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			h.one(cancelCmd(at(time.Second), c.GetId()), pb.Code_CODE_OK)
			long := strings.Repeat("é", MaxErrorLen/2) // the longest reason Validate lets through
			h.one(nackCmd(at(2*time.Second), c.GetId(), c.GetFence(), 0, long), pb.Code_CODE_OK)
			if got := len(h.task(c.GetId()).GetLastError()); got > MaxErrorLen {
				t.Fatalf("last_error of %d bytes, over MaxErrorLen %d", got, MaxErrorLen)
			}
		}},
		{"submit after cancel ends it cancelled and keeps the result", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			h.one(cancelCmd(at(time.Second), c.GetId()), pb.Code_CODE_OK)
			it := h.one(completeCmd(at(2*time.Second), c.GetId(), c.GetFence()), pb.Code_CODE_OK)
			if it.GetState() != pb.TaskState_TASK_STATE_CANCELLED {
				t.Fatalf("submit answered %v", it)
			}
			task := h.task(c.GetId())
			wantEnded(t, task, pb.TaskState_TASK_STATE_CANCELLED, pb.AttemptOutcome_ATTEMPT_OUTCOME_CANCELLED)
			if string(task.GetResult()) != "ok" || task.GetOutcome() != pb.Outcome_OUTCOME_COMPLETED {
				t.Fatalf("the submitted result was not kept: %v", task)
			}
			// The same Submit again (a retry after a lost answer) is done.
			h.one(completeCmd(at(3*time.Second), c.GetId(), c.GetFence()), pb.Code_CODE_ALREADY_DONE)
		}},
		{"lease expiry after cancel ends it cancelled, not requeued", func(t *testing.T, h *harness) {
			n := nt("q", "a", 0)
			n.MaxAttempts = 5
			h.enqueue(at(0), n)
			c := h.claimOne(at(0), "q", "a")
			h.one(cancelCmd(at(time.Second), c.GetId()), pb.Code_CODE_OK)
			items, err := h.f.ExpiredLeases(at(time.Minute), 10)
			if err != nil || len(items) != 1 {
				t.Fatalf("expired leases %v %v", items, err)
			}
			h.one(reapCmd(at(time.Minute), items...), pb.Code_CODE_OK)
			wantEnded(t, h.task(c.GetId()), pb.TaskState_TASK_STATE_CANCELLED, pb.AttemptOutcome_ATTEMPT_OUTCOME_CANCELLED)
			if s := h.stats("q", "a"); s.GetPending() != 0 || s.GetTotals().GetLeaseExpired() != 1 || s.GetTotals().GetRequeued() != 0 {
				t.Fatalf("stats after the reap %v", s)
			}
		}},
		{"release after cancel ends it cancelled", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			h.one(cancelCmd(at(time.Second), c.GetId()), pb.Code_CODE_OK)
			h.one(releaseCmd(at(time.Second), &pb.ReapItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_OK)
			wantEnded(t, h.task(c.GetId()), pb.TaskState_TASK_STATE_CANCELLED, pb.AttemptOutcome_ATTEMPT_OUTCOME_CANCELLED)
		}},
		{"cancel of a finished task is wrong state", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			h.one(completeCmd(at(time.Second), c.GetId(), c.GetFence()), pb.Code_CODE_OK)
			h.one(cancelCmd(at(2*time.Second), c.GetId()), pb.Code_CODE_WRONG_STATE)
			h.one(cancelCmd(at(2*time.Second), "nope"), pb.Code_CODE_NOT_FOUND)
		}},
		{"cancel checks the tenant", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			cmd := cancelCmd(at(time.Second), c.GetId())
			cmd.GetCancel().Tenant = "b"
			h.one(cmd, pb.Code_CODE_NOT_FOUND)
			if h.task(c.GetId()).GetCancelRequested() {
				t.Fatal("another tenant's cancel marked the task")
			}
		}},
		{"claim records the execution deadline and indexes it", func(t *testing.T, h *harness) {
			h.enqueue(at(0), timed(30*time.Second, false), nt("q", "a", 0))
			c := h.claimOne(at(time.Second), "q", "a")
			if c.GetDeadlineAt() != at(31*time.Second) || c.GetTimeoutNs() != int64(30*time.Second) {
				t.Fatalf("claimed %v, want deadline %d", c, at(31*time.Second))
			}
			if a := lastAttempt(t, h.task(c.GetId())); a.GetDeadlineAt() != at(31*time.Second) {
				t.Fatalf("attempt %v has no deadline", a)
			}
			if got := h.f.ready.dumpRunning(); !slices.Contains(got, fmt.Sprintf("o/%d/%s", at(31*time.Second), c.GetId())) {
				t.Fatalf("the deadline order %v does not hold it", got)
			}
			plain := h.claimOne(at(time.Second), "q", "a")
			if plain.GetDeadlineAt() != 0 {
				t.Fatalf("a task without a timeout got deadline %d", plain.GetDeadlineAt())
			}
			if got, err := h.f.PastDeadlines(at(30*time.Second), 10); err != nil || len(got) != 0 {
				t.Fatalf("past deadlines before it: %v %v", got, err)
			}
			got, err := h.f.PastDeadlines(at(31*time.Second), 10)
			if err != nil || len(got) != 1 || got[0].GetTaskId() != c.GetId() || got[0].GetFence() != c.GetFence() {
				t.Fatalf("past deadlines at it: %v %v", got, err)
			}
		}},
		{"heartbeat past the deadline is refused and changes nothing", func(t *testing.T, h *harness) {
			h.enqueue(at(0), timed(5*time.Second, false))
			c := h.claimOne(at(0), "q", "a")
			hb := &pb.HeartbeatItem{TaskId: c.GetId(), Fence: c.GetFence()}
			h.one(heartbeatCmd(at(4*time.Second), hb), pb.Code_CODE_OK)
			it := h.one(heartbeatCmd(at(5*time.Second), hb), pb.Code_CODE_TIMED_OUT)
			if it.GetFence() != 0 {
				t.Fatal("a refused heartbeat shows the fence")
			}
			task := h.task(c.GetId())
			if task.GetState() != pb.TaskState_TASK_STATE_RUNNING || task.GetLeaseUntil() != at(4*time.Second+lease) {
				t.Fatalf("the refused heartbeat changed the task: %v", task)
			}
		}},
		{"timeout ends it failed even while it heartbeats", func(t *testing.T, h *harness) {
			n := timed(5*time.Second, false)
			n.MaxAttempts = 3
			h.enqueue(at(0), n)
			c := h.claimOne(at(0), "q", "a")
			h.one(heartbeatCmd(at(4*time.Second), &pb.HeartbeatItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_OK)
			ref := &pb.ReapItem{TaskId: c.GetId(), Fence: c.GetFence()}
			h.one(timeOutCmd(at(4*time.Second), ref), pb.Code_CODE_WRONG_STATE) // not yet
			h.one(timeOutCmd(at(5*time.Second), ref), pb.Code_CODE_OK)
			task := h.task(c.GetId())
			wantEnded(t, task, pb.TaskState_TASK_STATE_FAILED, pb.AttemptOutcome_ATTEMPT_OUTCOME_TIMED_OUT)
			if !strings.Contains(task.GetLastError(), "timeout") || task.GetOutcome() != pb.Outcome_OUTCOME_UNSPECIFIED {
				t.Fatalf("timed-out record %v", task)
			}
			if got, _ := h.f.PastDeadlines(at(time.Hour), 10); len(got) != 0 {
				t.Fatalf("the o/ key outlived the claim: %v", got)
			}
			h.one(timeOutCmd(at(6*time.Second), ref), pb.Code_CODE_STALE_FENCE)
			h.one(completeCmd(at(6*time.Second), c.GetId(), c.GetFence()), pb.Code_CODE_STALE_FENCE)
		}},
		{"a heartbeat after the timeout ended its claim hears TIMED_OUT", func(t *testing.T, h *harness) {
			// The leader's TimeOut and the worker's heartbeat race; the
			// worker must learn of the timeout either way, not of a lost lease.
			h.enqueue(at(0), timed(5*time.Second, false), timed(5*time.Second, true))
			tasks := h.claim(at(0), "q", "a", 2)
			for _, c := range tasks {
				h.one(timeOutCmd(at(5*time.Second), &pb.ReapItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_OK)
				it := h.one(heartbeatCmd(at(6*time.Second), &pb.HeartbeatItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_TIMED_OUT)
				if it.GetFence() != 0 {
					t.Fatal("the refused heartbeat shows the fence")
				}
			}
			// Once a later claim holds the requeued task, the old fence is only stale.
			again := h.claimOne(at(7*time.Second), "q", "a")
			h.one(heartbeatCmd(at(8*time.Second), &pb.HeartbeatItem{TaskId: again.GetId(), Fence: tasks[1].GetFence()}), pb.Code_CODE_STALE_FENCE)
			// A claim its worker completed in time is stale to a late heartbeat, not timed out.
			h.enqueue(at(8*time.Second), timed(5*time.Second, false))
			done := h.claimOne(at(8*time.Second), "q", "a")
			h.one(completeCmd(at(9*time.Second), done.GetId(), done.GetFence()), pb.Code_CODE_OK)
			h.one(heartbeatCmd(at(20*time.Second), &pb.HeartbeatItem{TaskId: done.GetId(), Fence: done.GetFence()}), pb.Code_CODE_STALE_FENCE)
		}},
		{"timeout with retry_on_timeout requeues, then dead-letters", func(t *testing.T, h *harness) {
			n := timed(5*time.Second, true)
			n.MaxAttempts = 2
			h.enqueue(at(0), n)
			c := h.claimOne(at(0), "q", "a")
			h.one(timeOutCmd(at(5*time.Second), &pb.ReapItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_OK)
			task := h.task(c.GetId())
			wantEnded(t, task, pb.TaskState_TASK_STATE_PENDING, pb.AttemptOutcome_ATTEMPT_OUTCOME_TIMED_OUT)
			if task.GetAttempts() != 1 || !strings.Contains(lastAttempt(t, task).GetError(), "timeout") {
				t.Fatalf("requeued record %v", task)
			}
			c2 := h.claimOne(at(6*time.Second), "q", "a")
			if c2.GetDeadlineAt() != at(11*time.Second) {
				t.Fatalf("the second claim's deadline %d, want %d", c2.GetDeadlineAt(), at(11*time.Second))
			}
			items, err := h.f.PastDeadlines(at(11*time.Second), 10)
			if err != nil || len(items) != 1 {
				t.Fatalf("past deadlines %v %v", items, err)
			}
			h.one(timeOutCmd(at(11*time.Second), items...), pb.Code_CODE_OK)
			wantEnded(t, h.task(c.GetId()), pb.TaskState_TASK_STATE_DEAD, pb.AttemptOutcome_ATTEMPT_OUTCOME_TIMED_OUT)
		}},
		{"timeout of a cancel-requested claim ends it cancelled", func(t *testing.T, h *harness) {
			h.enqueue(at(0), timed(5*time.Second, true))
			c := h.claimOne(at(0), "q", "a")
			h.one(cancelCmd(at(time.Second), c.GetId()), pb.Code_CODE_OK)
			h.one(timeOutCmd(at(5*time.Second), &pb.ReapItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_OK)
			wantEnded(t, h.task(c.GetId()), pb.TaskState_TASK_STATE_CANCELLED, pb.AttemptOutcome_ATTEMPT_OUTCOME_CANCELLED)
		}},
		{"nack past the deadline ends it by the timeout's policy", func(t *testing.T, h *harness) {
			h.enqueue(at(0), timed(5*time.Second, false), timed(5*time.Second, true))
			tasks := h.claim(at(0), "q", "a", 2)
			for i, c := range tasks {
				it := h.one(nackCmd(at(5*time.Second), c.GetId(), c.GetFence(), 0, "context canceled"), pb.Code_CODE_OK)
				want := []pb.TaskState{pb.TaskState_TASK_STATE_FAILED, pb.TaskState_TASK_STATE_PENDING}[i]
				if it.GetState() != want {
					t.Fatalf("nack of task %d past its deadline answered %v, want %v", i, it.GetState(), want)
				}
				wantEnded(t, h.task(c.GetId()), want, pb.AttemptOutcome_ATTEMPT_OUTCOME_TIMED_OUT)
			}
		}},
		{"submit before the leader's timeout wins", func(t *testing.T, h *harness) {
			h.enqueue(at(0), timed(5*time.Second, false))
			c := h.claimOne(at(0), "q", "a")
			h.one(completeCmd(at(6*time.Second), c.GetId(), c.GetFence()), pb.Code_CODE_OK)
			h.one(timeOutCmd(at(6*time.Second), &pb.ReapItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_STALE_FENCE)
			wantEnded(t, h.task(c.GetId()), pb.TaskState_TASK_STATE_COMPLETED, pb.AttemptOutcome_ATTEMPT_OUTCOME_COMPLETED)
		}},
		{"state survives reopen and snapshot", func(t *testing.T, h *harness) {
			h.enqueue(at(0), timed(5*time.Second, false))
			c := h.claimOne(at(0), "q", "a")
			h.one(cancelCmd(at(time.Second), c.GetId()), pb.Code_CODE_OK)
			h.reopen()
			other := newHarness(t)
			if err := restoreFrom(other.f, mustSnapshot(t, h.f)); err != nil {
				t.Fatal(err)
			}
			other.index = h.index
			for _, x := range []*harness{h, other} {
				if it := x.one(heartbeatCmd(at(2*time.Second), &pb.HeartbeatItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_OK); !it.GetCancelRequested() {
					t.Fatal("the cancel request did not survive")
				}
				if got, _ := x.f.PastDeadlines(at(5*time.Second), 10); len(got) != 1 {
					t.Fatalf("the deadline did not survive: %v", got)
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := cancelHarness(t)
			c.run(t, h)
			checkKeyspace(t, h.f)
		})
	}
}

// Test_CancelRunningWaitsForItsLevel: before the latch Cancel of a running
// task is WRONG_STATE, a timeout_ns is dropped, and apply writes exactly
// what a level-7 build writes, byte for byte.
func Test_CancelRunningWaitsForItsLevel(t *testing.T) {
	newer := newHarness(t)
	older := &harness{t: t, dir: t.TempDir(), opts: Options{MaxLevel: LevelQueueControl}}
	older.f = mustOpen(t, older.dir, older.opts)
	var c *pb.Task
	for _, h := range []*harness{newer, older} {
		h.do(latchCmd(LevelQueueControl))
		first := timed(5*time.Second, true)
		if h == older {
			// A build before the level drops the fields it does not know
			// (the leader's gate keeps them out of the log anyway).
			first = nt("q", "a", 0)
		}
		h.enqueue(at(0), first, nt("q", "a", 0))
		c = h.claimOne(at(0), "q", "a")
		h.one(cancelCmd(at(time.Second), c.GetId()), pb.Code_CODE_WRONG_STATE)
		hb := h.one(heartbeatCmd(at(6*time.Second), &pb.HeartbeatItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_OK)
		if hb.GetCancelRequested() {
			t.Fatal("heartbeat says cancel requested before the latch")
		}
		h.one(nackCmd(at(7*time.Second), c.GetId(), c.GetFence(), 0, "x"), pb.Code_CODE_OK)
	}
	if a, b := mustHash(t, newer.f), mustHash(t, older.f); a != b {
		t.Fatalf("before the latch the keyspaces differ: %s vs %s", a, b)
	}
	task := newer.task(c.GetId())
	if task.GetTimeoutNs() != 0 || task.GetDeadlineAt() != 0 || task.GetState() != pb.TaskState_TASK_STATE_PENDING {
		t.Fatalf("before the latch: %v", task)
	}
	// A command of the level's own type needs it.
	if got := CommandLevel(timeOutCmd(at(0), &pb.ReapItem{TaskId: "x", Fence: 1})); got != LevelCancelRunning {
		t.Fatalf("TimeOut needs level %d", got)
	}
	if got := CommandLevel(enqueueCmd(at(0), timed(time.Second, false))); got != LevelCancelRunning {
		t.Fatalf("an enqueue with a timeout needs level %d", got)
	}
	if got := CommandLevel(enqueueCmd(at(0), nt("q", "a", 0))); got != LevelBase {
		t.Fatalf("a plain enqueue needs level %d", got)
	}
}

// cancelOutcomes counts the attempts of every task that ended CANCELLED
// (after a cancel request) and TIMED_OUT.
func cancelOutcomes(ks *keyspace) (cancelled, timedOut int) {
	for _, task := range ks.tasks {
		for _, a := range task.GetHistory() {
			switch a.GetOutcome() {
			case pb.AttemptOutcome_ATTEMPT_OUTCOME_CANCELLED:
				cancelled++
			case pb.AttemptOutcome_ATTEMPT_OUTCOME_TIMED_OUT:
				timedOut++
			}
		}
	}
	return cancelled, timedOut
}

// Test_CancelRunningValidate: a bad timeout or an empty TimeOut is refused
// naming its field, and changes nothing.
func Test_CancelRunningValidate(t *testing.T) {
	neg := timed(-time.Second, false)
	for _, c := range []struct {
		cmd   *pb.Command
		field string
	}{
		{enqueueCmd(at(0), nt("q", "a", 0), neg), "tasks[1].timeout_ns"},
		{enqueueCmd(at(0), timed(MaxDelay+1, false)), "tasks[0].timeout_ns"},
		{timeOutCmd(at(0)), "items"},
		{timeOutCmd(at(0), &pb.ReapItem{TaskId: "x"}), "items[0].fence"},
		{&pb.Command{Type: pb.CommandType_COMMAND_TYPE_TIME_OUT, Now: at(0)}, "body"},
	} {
		h := cancelHarness(t)
		res := h.apply(c.cmd)
		if res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT || res.GetErrorField() != c.field {
			t.Errorf("%v: %v %s, want INVALID_ARGUMENT on %s", c.cmd.GetType(), res.GetErrorCode(), res.GetErrorField(), c.field)
		}
	}
}
