package dashboard

import (
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_HumanWords: durations, attempts and backoffs read as people write
// them.
func Test_HumanWords(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1173900 * time.Millisecond: "19m34s",
		4210 * time.Millisecond:    "4.2s",
		120 * time.Millisecond:     "120ms",
		76 * time.Hour:             "3d4h",
	} {
		if got := human(d); got != want {
			t.Errorf("human(%v) = %q, want %q", d, got, want)
		}
	}
	for _, c := range []struct {
		t    *pb.Task
		want string
	}{
		{&pb.Task{State: pb.TaskState_TASK_STATE_RUNNING, MaxAttempts: 5}, "attempt 1 of 5"},
		{&pb.Task{State: pb.TaskState_TASK_STATE_DELAYED, Attempts: 2, MaxAttempts: 5}, "2 failed; next is attempt 3 of 5"},
		{&pb.Task{State: pb.TaskState_TASK_STATE_COMPLETED, Claims: 1, MaxAttempts: 5}, "finished after 1 claim"},
		{&pb.Task{State: pb.TaskState_TASK_STATE_DEAD, Attempts: 5, MaxAttempts: 5}, "5 of 5 attempts failed"},
	} {
		if got := attemptText(c.t); got != c.want {
			t.Errorf("attemptText(%v) = %q, want %q", c.t.GetState(), got, c.want)
		}
	}
	p := &pb.RetryPolicy{BaseNs: int64(5 * time.Second), Multiplier: 2, CapNs: int64(10 * time.Minute), JitterPercent: 20}
	if got, want := backoff(p), "5s, doubling, up to 10m0s, less up to 20% jitter"; got != want {
		t.Errorf("backoff = %q, want %q", got, want)
	}
}
