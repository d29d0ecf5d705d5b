package fsm

import (
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_SnoozeFollowsCancelAndTimeout: a Snooze is a worker's hand-back
// like a Nack, so it cannot requeue a claim that a Cancel reached (it ends
// CANCELLED) or one past its execution deadline (the timeout's policy).
func Test_SnoozeFollowsCancelAndTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		cancel  bool
		at      time.Duration
		want    pb.TaskState
	}{
		{name: "plain snooze goes back delayed", at: 2 * time.Second, want: pb.TaskState_TASK_STATE_DELAYED},
		{name: "cancel requested ends cancelled", cancel: true, at: 2 * time.Second, want: pb.TaskState_TASK_STATE_CANCELLED},
		{name: "past the deadline ends failed", timeout: time.Second, at: 5 * time.Second, want: pb.TaskState_TASK_STATE_FAILED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply(latchCmd(FeatureLevel))
			task := nt("q", "t", 0)
			task.TimeoutNs = int64(tc.timeout)
			id := h.enqueue(at(0), task)[0]
			c := h.claimOne(at(time.Second), "q", "t")
			if tc.cancel {
				h.one(cancelCmd(at(time.Second), id), pb.Code_CODE_OK)
			}
			h.one(snoozeCmd(at(tc.at), id, c.GetFence(), time.Minute), pb.Code_CODE_OK)
			got := h.task(id)
			if got.GetState() != tc.want {
				t.Fatalf("after the snooze %s, want %s", got.GetState(), tc.want)
			}
			checkKeyspace(t, h.f)
		})
	}
}
