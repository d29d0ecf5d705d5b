package fsm

import (
	"strings"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// depsHarness is a harness whose cluster latched LevelDependencies, as a
// leader does before it proposes an Enqueue with parents.
func depsHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.do(latchCmd(LevelDependencies))
	return h
}

// after is a new task of q/a waiting on ids and on earlier positions.
func after(ids []string, idx ...uint32) *pb.NewTask {
	n := nt("q", "a", 0)
	n.After, n.AfterIndex = ids, idx
	return n
}

// finish claims the task id (it must be the queue's head) and submits it.
func (h *harness) finish(now int64, id string, outcome pb.Outcome) {
	h.t.Helper()
	c := h.claimOne(now, "q", "a")
	if c.GetId() != id {
		h.t.Fatalf("claimed %s, want %s", c.GetId(), id)
	}
	h.one(submitCmd(now, id, c.GetFence(), outcome, "r-"+id), pb.Code_CODE_OK)
}

func (h *harness) wantState(id string, want pb.TaskState) *pb.Task {
	h.t.Helper()
	tk := h.task(id)
	if tk.GetState() != want {
		h.t.Fatalf("task %s is %v (%s), want %v", id, tk.GetState(), tk.GetLastError(), want)
	}
	return tk
}

// childKeys counts the child index keys left in the keyspace.
func (h *harness) childKeys() int {
	h.t.Helper()
	r, release, err := h.f.reader()
	if err != nil {
		h.t.Fatal(err)
	}
	defer release()
	n := 0
	p := storage.DepsPrefix()
	err = storage.Scan(r, p, storage.PrefixEnd(p), 0, func(k, _ []byte) error {
		if strings.HasPrefix(string(k), "j/c/") {
			n++
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// Test_DependencyRules is the table of the dependency rules: each case runs
// on a fresh FSM latched at LevelDependencies.
func Test_DependencyRules(t *testing.T) {
	const (
		completed = pb.Outcome_OUTCOME_COMPLETED
		failed    = pb.Outcome_OUTCOME_FAILED
	)
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"child waits until its parent completed", func(t *testing.T, h *harness) {
			p := h.enqueue(at(0), nt("q", "a", 0))[0]
			c := h.enqueue(at(0), after([]string{p}))[0]
			tk := h.wantState(c, pb.TaskState_TASK_STATE_WAITING)
			if tk.GetWaiting() != 1 || len(tk.GetParents()) != 1 || tk.GetParents()[0] != p {
				t.Fatalf("child record %v", tk)
			}
			if s := h.stats("q", "a"); s.GetWaiting() != 1 || s.GetPending() != 1 {
				t.Fatalf("stats %v", s)
			}
			h.finish(at(time.Second), p, completed)
			h.wantState(c, pb.TaskState_TASK_STATE_DELAYED) // due at once
			if got := h.claimOne(at(time.Second), "q", "a"); got.GetId() != c || len(got.GetParents()) != 1 {
				t.Fatalf("claimed %v", got)
			}
			if s := h.stats("q", "a"); s.GetWaiting() != 0 || h.childKeys() != 0 {
				t.Fatalf("after release: stats %v, %d child keys", s, h.childKeys())
			}
		}},
		{"a diamond releases in order", func(t *testing.T, h *harness) {
			// 0 -> 1, 0 -> 2, {1,2} -> 3, in one command.
			ids := h.enqueue(at(0), nt("q", "a", 0), after(nil, 0), after(nil, 0), after(nil, 1, 2))
			if tk := h.wantState(ids[3], pb.TaskState_TASK_STATE_WAITING); tk.GetWaiting() != 2 {
				t.Fatalf("sink waits on %d", tk.GetWaiting())
			}
			if got := h.claim(at(0), "q", "a", 10); len(got) != 1 || got[0].GetId() != ids[0] {
				t.Fatalf("first claim %v", got)
			}
			h.one(completeCmd(at(0), ids[0], h.task(ids[0]).GetFence()), pb.Code_CODE_OK)
			h.finish(at(time.Second), ids[1], completed)
			if tk := h.wantState(ids[3], pb.TaskState_TASK_STATE_WAITING); tk.GetWaiting() != 1 {
				t.Fatalf("sink waits on %d", tk.GetWaiting())
			}
			h.finish(at(2*time.Second), ids[2], completed)
			h.finish(at(3*time.Second), ids[3], completed)
		}},
		{"a child keeps its priority and run_at", func(t *testing.T, h *harness) {
			p := h.enqueue(at(0), nt("q", "a", 0))[0]
			c := after([]string{p})
			c.RunAt = at(time.Hour)
			cid := h.enqueue(at(0), c)[0]
			h.finish(at(time.Second), p, completed)
			if tk := h.wantState(cid, pb.TaskState_TASK_STATE_DELAYED); tk.GetVisibleAt() != at(time.Hour) {
				t.Fatalf("released child visible at %d", tk.GetVisibleAt())
			}
			if got := h.claim(at(time.Minute), "q", "a", 1); len(got) != 0 {
				t.Fatalf("claimed before run_at: %v", got)
			}
		}},
		{"failed parent cancels and cascades", func(t *testing.T, h *harness) {
			ids := h.enqueue(at(0), nt("q", "a", 0), after(nil, 0), after(nil, 1))
			h.finish(at(time.Second), ids[0], failed)
			for _, id := range ids[1:] {
				if tk := h.wantState(id, pb.TaskState_TASK_STATE_CANCELLED); !strings.Contains(tk.GetLastError(), "ended") {
					t.Fatalf("cancelled child says %q", tk.GetLastError())
				}
			}
			if s := h.stats("q", "a"); s.GetWaiting() != 0 || s.GetCompleted() != 3 || h.childKeys() != 0 {
				t.Fatalf("stats %v, %d child keys", s, h.childKeys())
			}
		}},
		{"policy RUN runs after a failed parent", func(t *testing.T, h *harness) {
			ids := h.enqueue(at(0), nt("q", "a", 0), nt("q", "a", 0))
			c := after(ids)
			c.OnParentFailure = pb.ParentFailurePolicy_PARENT_FAILURE_POLICY_RUN
			cid := h.enqueue(at(0), c)[0]
			h.finish(at(time.Second), ids[0], failed)
			h.wantState(cid, pb.TaskState_TASK_STATE_WAITING)
			h.finish(at(2*time.Second), ids[1], completed)
			h.finish(at(3*time.Second), cid, completed)
		}},
		{"a dead parent cancels its child", func(t *testing.T, h *harness) {
			p := nt("q", "a", 0)
			p.MaxAttempts = 1
			pid := h.enqueue(at(0), p)[0]
			cid := h.enqueue(at(0), after([]string{pid}))[0]
			tk := h.claimOne(at(0), "q", "a")
			h.one(nackCmd(at(0), pid, tk.GetFence(), 0, "boom"), pb.Code_CODE_OK)
			h.wantState(pid, pb.TaskState_TASK_STATE_DEAD)
			h.wantState(cid, pb.TaskState_TASK_STATE_CANCELLED)
		}},
		{"a reaped parent out of attempts cancels its child", func(t *testing.T, h *harness) {
			p := nt("q", "a", 0)
			p.MaxAttempts = 1
			pid := h.enqueue(at(0), p)[0]
			cid := h.enqueue(at(0), after([]string{pid}))[0]
			tk := h.claimOne(at(0), "q", "a")
			h.one(reapCmd(at(time.Hour), &pb.ReapItem{TaskId: pid, Fence: tk.GetFence()}), pb.Code_CODE_OK)
			h.wantState(cid, pb.TaskState_TASK_STATE_CANCELLED)
		}},
		{"cancelling a parent cancels its child; cancelling a waiting child frees its parent", func(t *testing.T, h *harness) {
			ids := h.enqueue(at(0), nt("q", "a", 0), after(nil, 0), nt("q", "a", 0), after(nil, 2))
			h.one(cancelCmd(at(0), ids[0]), pb.Code_CODE_OK)
			h.wantState(ids[1], pb.TaskState_TASK_STATE_CANCELLED)
			h.one(cancelCmd(at(0), ids[3]), pb.Code_CODE_OK)
			if h.childKeys() != 0 {
				t.Fatalf("%d child keys left", h.childKeys())
			}
			h.finish(at(time.Second), ids[2], completed) // its child is gone: nothing to visit
		}},
		{"already finished parents count at enqueue", func(t *testing.T, h *harness) {
			ids := h.enqueue(at(0), nt("q", "a", 0), nt("q", "a", 0))
			h.finish(at(0), ids[0], completed)
			h.finish(at(0), ids[1], failed)
			ok := h.enqueue(at(0), after(ids[:1]))[0]
			h.wantState(ok, pb.TaskState_TASK_STATE_PENDING)
			run := after(ids)
			run.OnParentFailure = pb.ParentFailurePolicy_PARENT_FAILURE_POLICY_RUN
			h.wantState(h.enqueue(at(0), run)[0], pb.TaskState_TASK_STATE_PENDING)
			cancelled := h.enqueue(at(0), after(ids))[0]
			h.wantState(cancelled, pb.TaskState_TASK_STATE_CANCELLED)
		}},
		{"unknown or foreign parent is refused whole, invalid as a cycle is", func(t *testing.T, h *harness) {
			other := h.enqueue(at(0), nt("q", "b", 0))[0]
			for _, id := range []string{"00000000000000990000", other} {
				res := h.apply(enqueueCmd(at(0), nt("q", "a", 0), after([]string{id})))
				if res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT || res.GetErrorField() != "tasks[1].after" ||
					!strings.Contains(res.GetErrorDetail(), id) || strings.Contains(res.GetErrorDetail(), "tenant b") {
					t.Fatalf("parent %s: %v %s %s", id, res.GetErrorCode(), res.GetErrorField(), res.GetErrorDetail())
				}
			}
			if s := h.stats("q", "a"); s.GetPending() != 0 {
				t.Fatalf("a refused enqueue stored tasks: %v", s)
			}
		}},
		{"self and forward references are refused", func(t *testing.T, h *harness) {
			for _, idx := range []uint32{1, 2} {
				res := h.apply(enqueueCmd(at(0), nt("q", "a", 0), after(nil, idx), nt("q", "a", 0)))
				if res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT || res.GetErrorField() != "tasks[1].after_index" {
					t.Fatalf("index %d: %v %s", idx, res.GetErrorCode(), res.GetErrorField())
				}
			}
			many := make([]string, MaxParents+1)
			for i := range many {
				many[i] = "x"
			}
			if res := h.apply(enqueueCmd(at(0), after(many))); res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT {
				t.Fatalf("%d parents: %v", len(many), res.GetErrorCode())
			}
		}},
		{"a reference to a refused task refuses the child", func(t *testing.T, h *harness) {
			cmd := enqueueCmd(at(0), nt("q", "a", 0), after(nil, 0))
			cmd.GetEnqueue().Limits = &pb.TenantLimits{MaxTasks: 0, MaxBytes: 1}
			res := h.do(cmd)
			for i, it := range res.GetItems() {
				if it.GetCode() == pb.Code_CODE_OK {
					t.Fatalf("item %d stored: %v", i, it)
				}
			}
			// The child is refused for its parent's reason: the tenant
			// limit, so the caller retries the graph, not fixes it.
			if res.GetItems()[1].GetCode() != pb.Code_CODE_RESOURCE_EXHAUSTED || !strings.Contains(res.GetItems()[1].GetDetail(), "tasks[0]") {
				t.Fatalf("child answered %v", res.GetItems()[1])
			}
		}},
		{"after_index counts within each command of a Batch", func(t *testing.T, h *harness) {
			sub := func() *pb.Command { return enqueueCmd(0, nt("q", "a", 0), after(nil, 0)) }
			res := h.do(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_BATCH, Now: at(0),
				Body: &pb.Command_Batch{Batch: &pb.BatchCmd{Commands: []*pb.Command{sub(), sub()}}}})
			for i, r := range res.GetResults() {
				parent, child := r.GetItems()[0].GetTaskId(), r.GetItems()[1].GetTaskId()
				if tk := h.wantState(child, pb.TaskState_TASK_STATE_WAITING); tk.GetParents()[0] != parent {
					t.Fatalf("command %d: child waits on %v, want its own %s", i, tk.GetParents(), parent)
				}
			}
		}},
		{"a duplicate parent is the existing task", func(t *testing.T, h *harness) {
			p := nt("q", "a", 0)
			p.IdempotencyKey = "k"
			pid := h.enqueue(at(0), p)[0]
			res := h.do(enqueueCmd(at(0), p, after(nil, 0)))
			cid := res.GetItems()[1].GetTaskId()
			if tk := h.wantState(cid, pb.TaskState_TASK_STATE_WAITING); tk.GetParents()[0] != pid {
				t.Fatalf("child waits on %v, want %s", tk.GetParents(), pid)
			}
		}},
		{"purging a pending parent cancels its child", func(t *testing.T, h *harness) {
			ids := h.enqueue(at(0), nt("q", "a", 0), after(nil, 0))
			h.do(purgeQueueCmd(at(0), "q", "a", false, 10))
			if tk := h.wantState(ids[1], pb.TaskState_TASK_STATE_CANCELLED); !strings.Contains(tk.GetLastError(), "purged") {
				t.Fatalf("last error %q", tk.GetLastError())
			}
		}},
		{"a purged parent counts as completed while its tombstone lasts", func(t *testing.T, h *harness) {
			ok, bad := nt("q", "a", 0), nt("q", "a", 0)
			ok.RetentionNs, bad.RetentionNs = int64(time.Second), int64(time.Second)
			ids := h.enqueue(at(0), ok, bad)
			h.finish(at(0), ids[0], completed)
			h.finish(at(0), ids[1], failed)
			h.do(purgeCmd(at(time.Minute), 10))
			if _, err := h.f.GetTask(ids[0]); err == nil {
				t.Fatal("retention kept the parent")
			}
			h.wantState(h.enqueue(at(time.Minute), after(ids[:1]))[0], pb.TaskState_TASK_STATE_PENDING)
			// A purged failed parent and another tenant's purged task are
			// unknown.
			for _, n := range []*pb.NewTask{after(ids[1:]), {Queue: "q", Tenant: "b", After: ids[:1]}} {
				if res := h.apply(enqueueCmd(at(time.Minute), n)); res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT {
					t.Fatalf("purged parent %v: %v", n.GetAfter(), res.GetErrorCode())
				}
			}
			// The tombstone lasts one more retention (a second), then
			// Purge deletes it and the parent is unknown too.
			if due, expired, err := h.f.HasDue(at(time.Minute + 2*time.Second)); err != nil || !expired {
				t.Fatalf("HasDue with an expired tombstone: %v %v %v", due, expired, err)
			}
			h.do(purgeCmd(at(time.Minute+2*time.Second), 10))
			if res := h.apply(enqueueCmd(at(time.Minute+2*time.Second), after(ids[:1]))); res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT {
				t.Fatalf("parent after its tombstone expired: %v", res.GetErrorCode())
			}
		}},
		{"a parent's record stays while its child waits", func(t *testing.T, h *harness) {
			// A parent with a waiting child has not ended, so retention
			// cannot purge it; it ends, and then its child is released.
			p := nt("q", "a", 0)
			p.RetentionNs = int64(time.Second)
			pid := h.enqueue(at(0), p)[0]
			cid := h.enqueue(at(0), after([]string{pid}))[0]
			h.do(purgeCmd(at(time.Hour), 10))
			h.wantState(pid, pb.TaskState_TASK_STATE_PENDING)
			h.finish(at(time.Hour), pid, completed)
			h.do(purgeCmd(at(2*time.Hour), 10))
			h.wantState(cid, pb.TaskState_TASK_STATE_DELAYED)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := depsHarness(t)
			c.run(t, h)
			checkKeyspace(t, h.f)
		})
	}
}

// Test_DependenciesWaitForTheirLevel: before the latch an Enqueue's
// dependencies are ignored, as a build that does not know them ignores
// them, so a mixed-version cluster stays byte-identical.
func Test_DependenciesWaitForTheirLevel(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(LevelQueueControl))
	ids := h.enqueue(at(0), nt("q", "a", 0), after(nil, 0))
	tk := h.wantState(ids[1], pb.TaskState_TASK_STATE_PENDING)
	if len(tk.GetParents()) != 0 || h.childKeys() != 0 {
		t.Fatalf("unlatched enqueue stored dependencies: %v", tk)
	}
	if got := CommandLevel(enqueueCmd(at(0), after(nil, 0))); got != LevelDependencies {
		t.Fatalf("CommandLevel of an Enqueue with parents = %d", got)
	}
	if got := CommandLevel(enqueueCmd(at(0), nt("q", "a", 0))); got != LevelBase {
		t.Fatalf("CommandLevel of a plain Enqueue = %d", got)
	}
}
