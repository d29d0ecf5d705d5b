package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

func u32p(v uint32) *uint32 { return &v }
func u64p(v uint64) *uint64 { return &v }

func submitTask(t *testing.T, ctx context.Context, n *cluster.Node, task *pb.Task) {
	t.Helper()
	nodetest.MustApply(t, ctx, n, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SUBMIT, Body: &pb.Command_Submit{
		Submit: &pb.SubmitCmd{TaskId: task.GetId(), Fence: task.GetFence(), Outcome: pb.Outcome_OUTCOME_COMPLETED}}})
}

// claimAsync starts a long poll of queue and returns where its answer goes.
func claimAsync(t *testing.T, ctx context.Context, n *cluster.Node, queue string, wait time.Duration) <-chan []*pb.Task {
	ch := make(chan []*pb.Task, 1)
	go func() {
		tasks, err := n.Service().Claim(ctx, n.Service().ClaimCommand(&pb.ClaimRequest{Queue: queue, WorkerId: "w"}), wait)
		if err != nil {
			t.Errorf("claim %s: %v", queue, err)
		}
		ch <- tasks
	}()
	return ch
}

func within(t *testing.T, ch <-chan []*pb.Task, d time.Duration, what string) []*pb.Task {
	t.Helper()
	select {
	case got := <-ch:
		return got
	case <-time.After(d):
		t.Fatalf("%s: the long poll still waits after %v", what, d)
		return nil
	}
}

// Test_ConcurrencyLimitedLongPoll: a long poll on a queue at its
// concurrency limit waits without proposing, as on an empty queue, and
// wakes when a running task of the queue ends.
func Test_ConcurrencyLimitedLongPoll(t *testing.T) {
	n := nodetest.Cluster(t, 1)[0]
	nodetest.WaitLevel(t, fsm.LevelLimits, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodetest.EnqueueN(t, ctx, n, "a", 3)
	nodetest.MustApply(t, ctx, n, service.SetQueueLimitsCommand("a", "", u32p(1), nil, nil))
	run := nodetest.ClaimNow(t, ctx, n, "a", 0)
	if len(run) != 1 {
		t.Fatalf("first claim took %d", len(run))
	}
	before := n.FSM().AppliedIndex()
	start := time.Now()
	if got := nodetest.ClaimNow(t, ctx, n, "a", 300*time.Millisecond); len(got) != 0 {
		t.Fatalf("a claim over the limit took %v", got)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("a limited claim answered after %v; it should wait out its 300 ms", took)
	}
	if got := n.FSM().AppliedIndex(); got > before+2 {
		t.Fatalf("a waiting claim on a limited queue proposed: applied %d → %d", before, got)
	}
	ch := claimAsync(t, ctx, n, "a", time.Minute)
	testwait.For(t, 5*time.Second, "the claim to wait", func() bool { _, _, w := n.Service().Waiting(); return w == 1 })
	submitTask(t, ctx, n, run[0])
	if got := within(t, ch, 10*time.Second, "after the running task ended"); len(got) != 1 {
		t.Fatalf("woken claim took %d tasks, want 1", len(got))
	}
}

// Test_RateLimitedLongPoll: a long poll on a queue whose bucket is empty
// sleeps until the next token is due and then takes it, proposing only a
// few entries meanwhile.
func Test_RateLimitedLongPoll(t *testing.T) {
	n := nodetest.Cluster(t, 1)[0]
	nodetest.WaitLevel(t, fsm.LevelLimits, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodetest.EnqueueN(t, ctx, n, "a", 3)
	nodetest.MustApply(t, ctx, n, service.SetQueueLimitsCommand("a", "", nil, u64p(1000), u32p(1))) // 1/s
	if got := nodetest.ClaimNow(t, ctx, n, "a", 0); len(got) != 1 {
		t.Fatalf("first claim took %d", len(got))
	}
	before := n.FSM().AppliedIndex()
	start := time.Now()
	got := within(t, claimAsync(t, ctx, n, "a", 10*time.Second), 15*time.Second, "waiting for a token")
	took := time.Since(start)
	if len(got) != 1 {
		t.Fatalf("the long poll took %d tasks, want 1 when the token came", len(got))
	}
	if took < 500*time.Millisecond || took > 3*time.Second {
		t.Fatalf("the token came after %v, want about a second", took)
	}
	if after := n.FSM().AppliedIndex(); after > before+4 {
		t.Fatalf("the waiting claim proposed %d entries in %v", after-before, took)
	}
}

// Test_TenantLimitWakesOtherQueue: under a tenant's concurrency limit, a
// task that ends in one queue wakes a long poll on another of the
// tenant's queues.
func Test_TenantLimitWakesOtherQueue(t *testing.T) {
	n := nodetest.Cluster(t, 1)[0]
	nodetest.WaitLevel(t, fsm.LevelLimits, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodetest.EnqueueN(t, ctx, n, "a", 1)
	nodetest.EnqueueN(t, ctx, n, "b", 1)
	nodetest.MustApply(t, ctx, n, service.SetQueueLimitsCommand("", "", u32p(1), nil, nil))
	run := nodetest.ClaimNow(t, ctx, n, "a", 0)
	if len(run) != 1 {
		t.Fatalf("claim of a took %d", len(run))
	}
	ch := claimAsync(t, ctx, n, "b", time.Minute)
	testwait.For(t, 5*time.Second, "the claim of b to wait", func() bool { _, _, w := n.Service().Waiting(); return w == 1 })
	submitTask(t, ctx, n, run[0])
	if got := within(t, ch, 10*time.Second, "after the tenant's task ended"); len(got) != 1 {
		t.Fatalf("woken claim of b took %d, want 1", len(got))
	}
}
