package fsm

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// queueHarness is a harness whose cluster latched LevelQueueControl, as a
// leader does before it proposes pause or purge.
func queueHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.do(latchCmd(LevelQueueControl))
	return h
}

// Test_QueueControlRules is the table of the pause, resume and purge
// rules: each case runs steps on a fresh FSM and checks what claims,
// Stats and the keyspace say after them.
func Test_QueueControlRules(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"paused claim takes nothing", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0), nt("q", "a", 0))
			h.one(setPausedCmd(at(0), "q", "a", true), pb.Code_CODE_OK)
			if got := h.claim(at(0), "q", "a", 5); len(got) != 0 {
				t.Fatalf("claim of a paused queue took %d tasks", len(got))
			}
			if s := h.stats("q", "a"); !s.GetPaused() || s.GetPending() != 2 || s.GetRunning() != 0 {
				t.Fatalf("stats of the paused queue %v", s)
			}
			// Other queues and other tenants' queue of the same name go on.
			h.enqueue(at(0), nt("q", "b", 0), nt("r", "a", 0))
			h.claimOne(at(0), "q", "b")
			h.claimOne(at(0), "r", "a")
		}},
		{"paused claim promotes no delayed task", func(t *testing.T, h *harness) {
			d := nt("q", "a", 0)
			d.DelayNs = int64(time.Second)
			h.enqueue(at(0), d)
			h.one(setPausedCmd(at(0), "q", "a", true), pb.Code_CODE_OK)
			if got := h.claim(at(time.Minute), "q", "a", 1); len(got) != 0 {
				t.Fatalf("claim took %d", len(got))
			}
			if s := h.stats("q", "a"); s.GetDelayed() != 1 {
				t.Fatalf("the paused claim changed the delayed task: %v", s)
			}
		}},
		{"enqueue while paused", func(t *testing.T, h *harness) {
			h.one(setPausedCmd(at(0), "q", "a", true), pb.Code_CODE_OK)
			if s := h.stats("q", "a"); !s.GetPaused() {
				t.Fatalf("a queue paused before its first task is not listed paused: %v", s)
			}
			ids := h.enqueue(at(0), nt("q", "a", 0), nt("q", "a", 3))
			if s := h.stats("q", "a"); s.GetPending() != 2 || !s.GetPaused() {
				t.Fatalf("stats %v", s)
			}
			h.one(setPausedCmd(at(time.Second), "q", "a", false), pb.Code_CODE_OK)
			if got := h.claimOne(at(time.Second), "q", "a"); got.GetId() != ids[1] {
				t.Fatalf("after resume the claim took %s, want the higher priority %s", got.GetId(), ids[1])
			}
		}},
		{"running tasks go on while paused", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0), nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			h.one(setPausedCmd(at(0), "q", "a", true), pb.Code_CODE_OK)
			h.one(heartbeatCmd(at(time.Second), &pb.HeartbeatItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_OK)
			h.one(completeCmd(at(2*time.Second), c.GetId(), c.GetFence()), pb.Code_CODE_OK)
		}},
		{"resume", func(t *testing.T, h *harness) {
			h.one(setPausedCmd(at(0), "q", "a", false), pb.Code_CODE_ALREADY_DONE) // never paused
			h.enqueue(at(0), nt("q", "a", 0))
			h.one(setPausedCmd(at(0), "q", "a", true), pb.Code_CODE_OK)
			h.one(setPausedCmd(at(0), "q", "a", true), pb.Code_CODE_ALREADY_DONE)
			h.one(setPausedCmd(at(0), "q", "a", false), pb.Code_CODE_OK)
			h.claimOne(at(0), "q", "a")
			if s := h.stats("q", "a"); s.GetPaused() {
				t.Fatalf("resumed queue listed paused: %v", s)
			}
			// A configuration back at every default is deleted.
			if _, _, err := h.f.db.Get(storage.QueueConfigKey("q", "a")); !errors.Is(err, pebble.ErrNotFound) {
				t.Fatalf("config record after resume: %v, want none", err)
			}
		}},
		{"pause survives reopen and snapshot", func(t *testing.T, h *harness) {
			h.enqueue(at(0), nt("q", "a", 0))
			h.one(setPausedCmd(at(0), "q", "a", true), pb.Code_CODE_OK)
			h.reopen()
			if got := h.claim(at(0), "q", "a", 1); len(got) != 0 {
				t.Fatal("claim after reopen took a task of the paused queue")
			}
			other := newHarness(t)
			if err := restoreFrom(other.f, mustSnapshot(t, h.f)); err != nil {
				t.Fatal(err)
			}
			other.index = h.index
			if got := other.claim(at(0), "q", "a", 1); len(got) != 0 {
				t.Fatal("claim after restore took a task of the paused queue")
			}
		}},
		{"purge waiting tasks", func(t *testing.T, h *harness) {
			d := nt("q", "a", 0)
			d.DelayNs = int64(time.Hour)
			keyed := nt("q", "a", 9)
			keyed.IdempotencyKey = "k1"
			ids := h.enqueue(at(0), nt("q", "a", 0), nt("q", "a", 0), d, keyed, nt("q", "b", 0))
			run := h.claimOne(at(0), "q", "a") // the priority-9 task
			if run.GetId() != ids[3] {
				t.Fatalf("claimed %s, want %s", run.GetId(), ids[3])
			}
			if res := h.do(purgeQueueCmd(at(0), "q", "a", false, 2)); len(res.GetItems()) != 2 {
				t.Fatalf("purge with limit 2: %d items", len(res.GetItems()))
			}
			if res := h.do(purgeQueueCmd(at(0), "q", "a", false, 10)); len(res.GetItems()) != 1 || res.GetItems()[0].GetTaskId() != ids[2] {
				t.Fatalf("second purge %v, want the delayed task %s", res.GetItems(), ids[2])
			}
			if s := h.stats("q", "a"); s.GetPending() != 0 || s.GetDelayed() != 0 || s.GetRunning() != 1 {
				t.Fatalf("stats after purge %v", s)
			}
			if s := h.stats("q", "b"); s.GetPending() != 1 {
				t.Fatalf("another tenant's queue was purged: %v", s)
			}
			for _, id := range ids[:3] {
				if _, err := h.f.GetTask(id); !errors.Is(err, pb.ErrNotFound) {
					t.Fatalf("purged task %s: %v", id, err)
				}
			}
			// The running task's key still dedupes; it was not purged.
			if it := h.one(enqueueCmd(at(0), keyed), pb.Code_CODE_DUPLICATE); it.GetTaskId() != ids[3] {
				t.Fatalf("key answered %s", it.GetTaskId())
			}
		}},
		{"purge dead letters", func(t *testing.T, h *harness) {
			one := nt("q", "a", 0)
			one.MaxAttempts = 1
			one.IdempotencyKey = "k2"
			ids := h.enqueue(at(0), one, nt("q", "a", 0))
			c := h.claimOne(at(0), "q", "a")
			h.one(nackCmd(at(0), c.GetId(), c.GetFence(), 0, "boom"), pb.Code_CODE_OK)
			if s := h.stats("q", "a"); s.GetDead() != 1 {
				t.Fatalf("stats %v", s)
			}
			res := h.do(purgeQueueCmd(at(0), "q", "a", true, 10))
			if len(res.GetItems()) != 1 || res.GetItems()[0].GetTaskId() != ids[0] {
				t.Fatalf("dead purge %v", res.GetItems())
			}
			if s := h.stats("q", "a"); s.GetDead() != 0 || s.GetPending() != 1 {
				t.Fatalf("stats after dead purge %v", s)
			}
			// Its idempotency key went with it: the same key is a new task.
			if it := h.one(enqueueCmd(at(0), one), pb.Code_CODE_OK); it.GetTaskId() == ids[0] {
				t.Fatal("key of a purged dead letter still dedupes")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := queueHarness(t)
			c.run(t, h)
			checkKeyspace(t, h.f)
		})
	}
}

// Test_ResumeWakesLongPolls: resuming a queue that holds pending tasks
// announces it in the batch's Event with its count, as an enqueue does,
// so the claims that long-polled the paused queue wake.
func Test_ResumeWakesLongPolls(t *testing.T) {
	h := queueHarness(t)
	h.enqueue(at(0), nt("q", "a", 0), nt("q", "a", 0))
	h.one(setPausedCmd(at(0), "q", "a", true), pb.Code_CODE_OK)
	var events []Event
	h.f.SetObserver(func(e Event) { events = append(events, e) })
	h.one(setPausedCmd(at(0), "q", "a", false), pb.Code_CODE_OK)
	if len(events) != 1 || len(events[0].Pending) != 1 || events[0].Pending[0] != (QueueCount{QueueRef{"q", "a"}, 2}) {
		t.Fatalf("events after resume %+v, want q/a with 2 pending", events)
	}
}

// Test_PurgeQueueWakesWaitResult: a purged task's WaitResult wakes (and
// then finds it gone) rather than wait for a task that will never end.
func Test_PurgeQueueWakesWaitResult(t *testing.T) {
	h := queueHarness(t)
	ids := h.enqueue(at(0), nt("q", "a", 0))
	var events []Event
	h.f.SetObserver(func(e Event) { events = append(events, e) })
	h.do(purgeQueueCmd(at(0), "q", "a", false, 10))
	if len(events) != 1 || len(events[0].Finished) != 1 || events[0].Finished[0] != ids[0] {
		t.Fatalf("events after purge %+v, want %s finished", events, ids[0])
	}
}
