package fsm

import (
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

func setRetryCmd(now int64, q, tn string, p *pb.RetryPolicy) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_RETRY, Now: now,
		Body: &pb.Command_SetQueueRetry{SetQueueRetry: &pb.SetQueueRetryCmd{Queue: q, Tenant: tn, HasRetry: true, Retry: p}}}
}

func setDeadRetentionCmd(now int64, q, tn string, keep time.Duration) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_RETRY, Now: now,
		Body: &pb.Command_SetQueueRetry{SetQueueRetry: &pb.SetQueueRetryCmd{Queue: q, Tenant: tn, HasDeadRetention: true, DeadRetentionNs: int64(keep)}}}
}

func resetQueueCmd(now int64, q, tn string) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_RETRY, Now: now,
		Body: &pb.Command_SetQueueRetry{SetQueueRetry: &pb.SetQueueRetryCmd{Queue: q, Tenant: tn, Reset_: true}}}
}

func snoozeCmd(now int64, id string, fence uint64, delay time.Duration) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SNOOZE, Now: now,
		Body: &pb.Command_Snooze{Snooze: &pb.SnoozeCmd{TaskId: id, Fence: fence, DelayNs: int64(delay)}}}
}

// updateTaskCmd changes a task's priority (prio >= 0) and/or run-at (> 0).
func updateTaskCmd(now int64, id string, prio int, runAt int64) *pb.Command {
	c := &pb.UpdateTaskCmd{TaskId: id, RunAt: runAt}
	if prio >= 0 {
		c.HasPriority, c.Priority = true, uint32(prio)
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_UPDATE_TASK, Now: now, Body: &pb.Command_UpdateTask{UpdateTask: c}}
}

// retryHarness is a harness whose cluster latched LevelRetries.
func retryHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.do(latchCmd(LevelRetries))
	return h
}

var exp = &pb.RetryPolicy{BaseNs: int64(time.Second), CapNs: int64(10 * time.Second), Multiplier: 2}

func Test_Backoff(t *testing.T) {
	cases := []struct {
		name string
		p    *pb.RetryPolicy
		n    uint32
		want time.Duration
	}{
		{"no policy", nil, 3, 0},
		{"first attempt is base", exp, 1, time.Second},
		{"doubles", exp, 2, 2 * time.Second},
		{"doubles again", exp, 4, 8 * time.Second},
		{"capped", exp, 5, 10 * time.Second},
		{"stays capped", exp, 1000, 10 * time.Second},
		{"constant without multiplier", &pb.RetryPolicy{BaseNs: int64(3 * time.Second)}, 7, 3 * time.Second},
		{"no cap stops at MaxDelay", &pb.RetryPolicy{BaseNs: int64(time.Hour), Multiplier: 1000}, 1000, MaxDelay},
		{"cap below base", &pb.RetryPolicy{BaseNs: int64(time.Minute), CapNs: int64(time.Second)}, 1, time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := time.Duration(Backoff(c.p, "0000000000000001", c.n)); got != c.want {
				t.Fatalf("Backoff(%v, %d) = %v, want %v", c.p, c.n, got, c.want)
			}
		})
	}
}

// Test_BackoffJitter: the jitter is a function of (id, attempt) alone,
// stays within its share of the delay, and spreads tasks apart.
func Test_BackoffJitter(t *testing.T) {
	p := &pb.RetryPolicy{BaseNs: int64(10 * time.Second), Multiplier: 2, CapNs: int64(time.Minute), JitterPercent: 30}
	seen := map[int64]bool{}
	for i := range 200 {
		id := TaskID(uint64(100+i), 0)
		for n := uint32(1); n <= 4; n++ {
			d := Backoff(p, id, n)
			if d != Backoff(p, id, n) {
				t.Fatalf("Backoff(%s, %d) differs between calls", id, n)
			}
			full := Backoff(&pb.RetryPolicy{BaseNs: p.BaseNs, Multiplier: 2, CapNs: p.CapNs}, id, n)
			if d > full || d < full-full*30/100 {
				t.Fatalf("Backoff(%s, %d) = %v, outside [%v, %v]", id, n, time.Duration(d), time.Duration(full*70/100), time.Duration(full))
			}
			if n == 1 {
				seen[d] = true
			}
		}
	}
	if len(seen) < 150 {
		t.Fatalf("200 tasks got only %d distinct first delays", len(seen))
	}
}

// Test_RetryRules is the table of the retry, snooze, update and
// dead-letter rules on a cluster that latched LevelRetries.
func Test_RetryRules(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"nack waits out the queue's backoff", func(t *testing.T, h *harness) {
			h.one(setRetryCmd(at(0), "q", "a", exp), pb.Code_CODE_OK)
			h.enqueue(at(0), nt("q", "a", 0))
			for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
				now := at(time.Duration(n) * time.Hour)
				c := h.claimOne(now, "q", "a")
				it := h.one(nackCmd(now, c.GetId(), c.GetFence(), 0, "boom"), pb.Code_CODE_OK)
				task := h.task(c.GetId())
				if it.GetState() != pb.TaskState_TASK_STATE_DELAYED || task.GetVisibleAt() != now+int64(want) {
					t.Fatalf("nack %d: %v visible at +%v, want delayed +%v", n+1, it.GetState(), time.Duration(task.GetVisibleAt()-now), want)
				}
			}
		}},
		{"a nack's own delay wins", func(t *testing.T, h *harness) {
			h.one(setRetryCmd(at(0), "q", "a", exp), pb.Code_CODE_OK)
			h.enqueue(at(0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			h.one(nackCmd(at(0), c.GetId(), c.GetFence(), time.Minute, ""), pb.Code_CODE_OK)
			if got := h.task(c.GetId()).GetVisibleAt(); got != at(time.Minute) {
				t.Fatalf("visible at +%v, want +1m", time.Duration(got-t0))
			}
		}},
		{"reap waits out the task's own backoff over the queue's", func(t *testing.T, h *harness) {
			h.one(setRetryCmd(at(0), "q", "a", exp), pb.Code_CODE_OK)
			own := nt("q", "a", 0)
			own.Retry = &pb.RetryPolicy{BaseNs: int64(time.Minute)}
			h.enqueue(at(0), own)
			c := h.claimOne(at(0), "q", "a")
			now := at(lease + time.Second)
			it := h.one(reapCmd(now, &pb.ReapItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_OK)
			if it.GetState() != pb.TaskState_TASK_STATE_DELAYED || h.task(c.GetId()).GetVisibleAt() != now+int64(time.Minute) {
				t.Fatalf("reaped task %v visible at %d", it.GetState(), h.task(c.GetId()).GetVisibleAt())
			}
			if got := h.claim(now+int64(time.Minute)-1, "q", "a", 1); len(got) != 0 {
				t.Fatal("claimed before its backoff ended")
			}
			h.claimOne(now+int64(time.Minute), "q", "a")
		}},
		{"no policy retries at once", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			if it := h.one(nackCmd(at(0), c.GetId(), c.GetFence(), 0, ""), pb.Code_CODE_OK); it.GetState() != pb.TaskState_TASK_STATE_PENDING {
				t.Fatalf("state %v", it.GetState())
			}
		}},
		{"clearing the queue's policy", func(t *testing.T, h *harness) {
			h.one(setRetryCmd(at(0), "q", "a", exp), pb.Code_CODE_OK)
			h.one(setRetryCmd(at(0), "q", "a", exp), pb.Code_CODE_ALREADY_DONE)
			h.one(setRetryCmd(at(0), "q", "a", nil), pb.Code_CODE_OK)
			if cfg, _ := storage.GetQueueConfig(storage.Wrap(h.f.db), "q", "a"); cfg.GetRetry() != nil {
				t.Fatalf("policy left: %v", cfg)
			}
		}},
		{"snooze keeps the attempts", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			it := h.one(snoozeCmd(at(time.Second), c.GetId(), c.GetFence(), 30*time.Second), pb.Code_CODE_OK)
			task := h.task(c.GetId())
			if it.GetState() != pb.TaskState_TASK_STATE_DELAYED || task.GetAttempts() != 0 || task.GetVisibleAt() != at(31*time.Second) {
				t.Fatalf("snoozed: %v attempts %d visible +%v", it.GetState(), task.GetAttempts(), time.Duration(task.GetVisibleAt()-t0))
			}
			if hs := task.GetHistory(); len(hs) != 1 || hs[0].GetOutcome() != pb.AttemptOutcome_ATTEMPT_OUTCOME_SNOOZED {
				t.Fatalf("history %v", hs)
			}
			// The old fence is stale now, for snooze as for submit.
			h.one(snoozeCmd(at(2*time.Second), c.GetId(), c.GetFence(), 0), pb.Code_CODE_STALE_FENCE)
			c2 := h.claimOne(at(31*time.Second), "q", "a")
			if it := h.one(snoozeCmd(at(31*time.Second), c2.GetId(), c2.GetFence(), 0), pb.Code_CODE_OK); it.GetState() != pb.TaskState_TASK_STATE_PENDING {
				t.Fatalf("snooze without delay: %v", it.GetState())
			}
			if got := h.task(c.GetId()); got.GetAttempts() != 0 || got.GetClaims() != 2 {
				t.Fatalf("after two snoozes: attempts %d claims %d", got.GetAttempts(), got.GetClaims())
			}
		}},
		{"update a pending task's priority", func(t *testing.T, h *harness) {
			ids := h.enqueue(at(0), nt("q", "a", 1), nt("q", "a", 5))
			h.one(updateTaskCmd(at(0), ids[0], 7, 0), pb.Code_CODE_OK)
			h.one(updateTaskCmd(at(0), ids[0], 7, 0), pb.Code_CODE_ALREADY_DONE)
			if got := h.claimOne(at(0), "q", "a"); got.GetId() != ids[0] {
				t.Fatalf("claimed %s, want the raised %s", got.GetId(), ids[0])
			}
		}},
		{"update run-at: pending to delayed and back", func(t *testing.T, h *harness) {
			ids := h.enqueue(at(0), nt("q", "a", 0))
			if it := h.one(updateTaskCmd(at(0), ids[0], -1, at(time.Hour)), pb.Code_CODE_OK); it.GetState() != pb.TaskState_TASK_STATE_DELAYED {
				t.Fatalf("state %v", it.GetState())
			}
			if got := h.claim(at(time.Minute), "q", "a", 1); len(got) != 0 {
				t.Fatal("claimed a task moved an hour ahead")
			}
			if it := h.one(updateTaskCmd(at(2*time.Minute), ids[0], -1, at(time.Minute)), pb.Code_CODE_OK); it.GetState() != pb.TaskState_TASK_STATE_PENDING {
				t.Fatalf("run-at in the past: %v", it.GetState())
			}
			h.claimOne(at(2*time.Minute), "q", "a")
		}},
		{"update refused for running, finished and another tenant's", func(t *testing.T, h *harness) {
			ids := h.enqueue(at(0), nt("q", "a", 0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			h.one(updateTaskCmd(at(0), c.GetId(), 3, 0), pb.Code_CODE_WRONG_STATE)
			h.one(completeCmd(at(0), c.GetId(), c.GetFence()), pb.Code_CODE_OK)
			h.one(updateTaskCmd(at(0), c.GetId(), 3, 0), pb.Code_CODE_WRONG_STATE)
			other := updateTaskCmd(at(0), ids[1], 3, 0)
			other.GetUpdateTask().Tenant = "b"
			h.one(other, pb.Code_CODE_NOT_FOUND)
			h.one(updateTaskCmd(at(0), "ffffffffffffffff0000", 3, 0), pb.Code_CODE_NOT_FOUND)
		}},
		{"dead letters expire after the default retention", func(t *testing.T, h *harness) {
			one := nt("q", "a", 0)
			one.MaxAttempts = 1
			h.enqueue(at(0), one)
			c := h.claimOne(at(0), "q", "a")
			h.one(nackCmd(at(0), c.GetId(), c.GetFence(), 0, ""), pb.Code_CODE_OK)
			keep := pb.DefaultDeadRetention
			if got := h.task(c.GetId()).GetExpireAt(); got != at(keep) {
				t.Fatalf("dead letter expires at +%v, want +%v", time.Duration(got-t0), keep)
			}
			if res := h.do(purgeCmd(at(keep)-1, 10)); len(res.GetItems()) != 0 {
				t.Fatal("purged before its expiry")
			}
			if res := h.do(purgeCmd(at(keep), 10)); len(res.GetItems()) != 1 {
				t.Fatalf("purge at expiry took %d", len(res.GetItems()))
			}
			if _, err := h.f.GetTask(c.GetId()); err == nil {
				t.Fatal("the dead letter is still stored")
			}
		}},
		{"a queue's dead retention, and a replay clears the expiry", func(t *testing.T, h *harness) {
			h.one(setDeadRetentionCmd(at(0), "q", "a", time.Hour), pb.Code_CODE_OK)
			one := nt("q", "a", 0)
			one.MaxAttempts = 1
			h.enqueue(at(0), one)
			c := h.claimOne(at(0), "q", "a")
			h.one(reapCmd(at(lease), &pb.ReapItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_OK)
			if got := h.task(c.GetId()); got.GetState() != pb.TaskState_TASK_STATE_DEAD || got.GetExpireAt() != at(lease+time.Hour) {
				t.Fatalf("reaped to %v expiring +%v", got.GetState(), time.Duration(got.GetExpireAt()-t0))
			}
			h.one(requeueDeadCmd(at(lease), c.GetId(), "", "", 0), pb.Code_CODE_OK)
			if res := h.do(purgeCmd(at(48*time.Hour), 10)); len(res.GetItems()) != 0 {
				t.Fatal("retention purged a replayed dead letter")
			}
			if got := h.task(c.GetId()); got.GetExpireAt() != 0 || got.GetState() != pb.TaskState_TASK_STATE_PENDING {
				t.Fatalf("replayed: %v expire %d", got.GetState(), got.GetExpireAt())
			}
		}},
		{"an empty queue leaves Stats", func(t *testing.T, h *harness) {
			short := nt("q", "a", 0)
			short.RetentionNs = int64(time.Second)
			h.enqueue(at(0), short)
			c := h.claimOne(at(0), "q", "a")
			h.one(completeCmd(at(0), c.GetId(), c.GetFence()), pb.Code_CODE_OK)
			if s := h.stats("q", "a"); s.GetCompleted() != 1 {
				t.Fatalf("before purge %v", s)
			}
			h.do(purgeCmd(at(time.Minute), 10))
			if all, _ := h.f.Stats("", ""); len(all) != 0 {
				t.Fatalf("Stats lists %v after the last task left", all)
			}
		}},
		{"a configured empty queue stays until reset", func(t *testing.T, h *harness) {
			h.one(setRetryCmd(at(0), "q", "a", exp), pb.Code_CODE_OK)
			ids := h.enqueue(at(0), nt("q", "a", 0))
			h.do(purgeQueueCmd(at(0), "q", "a", false, 10))
			if all, _ := h.f.Stats("", ""); len(all) != 1 {
				t.Fatalf("Stats lists %d queues, want the configured one", len(all))
			}
			h.one(resetQueueCmd(at(0), "q", "a"), pb.Code_CODE_OK)
			h.one(resetQueueCmd(at(0), "q", "a"), pb.Code_CODE_ALREADY_DONE)
			if all, _ := h.f.Stats("", ""); len(all) != 0 {
				t.Fatalf("Stats lists %v after reset", all)
			}
			_ = ids
		}},
		{"reset resumes a paused queue", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			h.one(setPausedCmd(at(0), "q", "a", true), pb.Code_CODE_OK)
			h.one(resetQueueCmd(at(0), "q", "a"), pb.Code_CODE_OK)
			h.claimOne(at(0), "q", "a")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := retryHarness(t)
			c.run(t, h)
			checkKeyspace(t, h.f)
		})
	}
}

// Test_RetriesWaitForTheirLevel: before the cluster latched LevelRetries
// a nack and a reap requeue at once and a dead letter has no expiry,
// whatever a queue's configuration says, and an empty queue keeps its
// catalog record: apply writes what a level-7 build writes.
func Test_RetriesWaitForTheirLevel(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(LevelQueueControl))
	h.one(setRetryCmd(at(0), "q", "a", exp), pb.Code_CODE_OK)
	own := nt("q", "a", 0)
	own.Retry, own.MaxAttempts = exp, 2
	ids := h.enqueue(at(0), own)
	if h.task(ids[0]).GetRetry() != nil {
		t.Fatal("a task's policy stored before the latch")
	}
	c := h.claimOne(at(0), "q", "a")
	if it := h.one(nackCmd(at(0), c.GetId(), c.GetFence(), 0, ""), pb.Code_CODE_OK); it.GetState() != pb.TaskState_TASK_STATE_PENDING {
		t.Fatalf("nack before the latch: %v", it.GetState())
	}
	c = h.claimOne(at(0), "q", "a")
	h.one(reapCmd(at(lease), &pb.ReapItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_OK)
	if got := h.task(c.GetId()); got.GetState() != pb.TaskState_TASK_STATE_DEAD || got.GetExpireAt() != 0 {
		t.Fatalf("dead before the latch: %v expire %d", got.GetState(), got.GetExpireAt())
	}
	h.do(purgeQueueCmd(at(lease), "q", "a", true, 10))
	h.one(resetQueueCmd(at(lease), "q", "a"), pb.Code_CODE_OK)
	if all, _ := h.f.Stats("", ""); len(all) != 1 {
		t.Fatalf("before the latch the empty queue's record went: %v", all)
	}
	checkKeyspace(t, h.f)
}

func Test_ValidateRetries(t *testing.T) {
	cases := []struct {
		name  string
		cmd   *pb.Command
		field string
	}{
		{"ok", setRetryCmd(t0, "q", "a", exp), ""},
		{"cap below base", setRetryCmd(t0, "q", "a", &pb.RetryPolicy{BaseNs: 10, CapNs: 5}), "retry.cap_ns"},
		{"jitter over 100", setRetryCmd(t0, "q", "a", &pb.RetryPolicy{BaseNs: 10, JitterPercent: 101}), "retry.jitter_percent"},
		{"base past MaxDelay", setRetryCmd(t0, "q", "a", &pb.RetryPolicy{BaseNs: int64(MaxDelay) + 1}), "retry.base_ns"},
		{"reset with a setting", &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_RETRY, Now: t0, Body: &pb.Command_SetQueueRetry{
			SetQueueRetry: &pb.SetQueueRetryCmd{Queue: "q", Tenant: "a", Reset_: true, HasRetry: true}}}, "reset"},
		{"snooze without fence", snoozeCmd(t0, "id", 0, 0), "fence"},
		{"snooze negative delay", snoozeCmd(t0, "id", 1, -time.Second), "delay_ns"},
		{"update with nothing", updateTaskCmd(t0, "id", -1, 0), "run_at"},
		{"update priority 10", updateTaskCmd(t0, "id", 10, 0), "priority"},
		{"update run-at too far", updateTaskCmd(t0, "id", -1, at(MaxDelay+time.Second)), "run_at"},
		{"task policy", enqueueCmd(t0, &pb.NewTask{Queue: "q", Tenant: "a", Retry: &pb.RetryPolicy{Multiplier: MaxMultiplier + 1}}), "tasks[0].retry.multiplier"},
		{"no body", &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SNOOZE, Now: t0}, "body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.cmd, DefaultLimits())
			if c.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			fe, ok := err.(*pb.FieldError)
			if !ok || fe.Field != c.field {
				t.Fatalf("err %v, want a FieldError on %q", err, c.field)
			}
		})
	}
}

// Test_ListTenantDead: the dead letters of every queue of one tenant,
// paged across queue boundaries, none of another tenant's, and a cursor
// of another tenant's listing refused.
func Test_ListTenantDead(t *testing.T) {
	h := retryHarness(t)
	kill := func(q, tn string) string {
		one := nt(q, tn, 0)
		one.MaxAttempts = 1
		h.enqueue(at(0), one)
		c := h.claimOne(at(0), q, tn)
		h.one(nackCmd(at(0), c.GetId(), c.GetFence(), 0, ""), pb.Code_CODE_OK)
		return c.GetId()
	}
	want := map[string]bool{}
	for _, q := range []string{"b", "a", "a-b", "c", "a"} {
		want[kill(q, "t1")] = true
	}
	h.enqueue(at(0), nt("d", "t1", 0)) // a queue without dead letters
	kill("a", "t2")
	kill("a", "t2") // two, so that a page of one hands out a cursor
	got := map[string]bool{}
	cursor, pages := "", 0
	for {
		tasks, next, err := h.f.ListTenantDead("t1", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, task := range tasks {
			if task.GetTenant() != "t1" || task.GetState() != pb.TaskState_TASK_STATE_DEAD || got[task.GetId()] {
				t.Fatalf("listed %v (twice: %v)", task, got[task.GetId()])
			}
			got[task.GetId()] = true
		}
		if next == "" {
			break
		}
		if pages > 10 {
			t.Fatal("listing does not end")
		}
		cursor = next
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d dead letters, want %d", len(got), len(want))
	}
	_, foreign, err := h.f.ListTasks("a", "t2", pb.TaskState_TASK_STATE_DEAD, "", 1)
	if err != nil || foreign == "" {
		t.Fatalf("t2's listing: cursor %q, %v", foreign, err)
	}
	if _, _, err := h.f.ListTenantDead("t1", foreign, 2); err == nil {
		t.Fatal("a cursor of tenant t2's listing was accepted for t1")
	} else if fe, ok := err.(*pb.FieldError); !ok || fe.Field != "cursor" {
		t.Fatalf("foreign cursor: %v, want a FieldError on cursor", err)
	}
}
