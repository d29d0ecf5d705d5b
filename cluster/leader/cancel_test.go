package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_CancelRunningGatedBeforeLatch: on a cluster latched below
// LevelCancelRunning an Enqueue carrying a timeout is refused with
// FEATURE_DISABLED (nothing proposed), a plain one goes on, and Cancel of
// a running task is still WRONG_STATE.
func Test_CancelRunningGatedBeforeLatch(t *testing.T) {
	n := nodetest.Start(t, nodetest.AtLevel(t, "n1", 1, fsm.LevelQueueControl))
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	testwait.For(t, 5*time.Second, "the old build's level latched", func() bool { return n.FSM().EnabledLevel() == fsm.LevelQueueControl })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	before := n.Internals().Raft.LastIndex()
	timed := service.EnqueueCommand(&pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", TimeoutNs: int64(time.Second)}}})
	var fe *service.FeatureError
	if _, err := n.Service().Propose(ctx, timed); !errors.As(err, &fe) || fe.Need != fsm.LevelCancelRunning {
		t.Fatalf("enqueue with a timeout on a level-%d cluster: %v, want service.FeatureError need %d", fsm.LevelQueueControl, err, fsm.LevelCancelRunning)
	}
	nodetest.AssertNotProposedSince(t, n, before, pb.CommandType_COMMAND_TYPE_ENQUEUE, "enqueue with a timeout")
	nodetest.MustApply(t, ctx, n, service.EnqueueCommand(&pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}}))
	task := nodetest.ClaimNow(t, ctx, n, "q", 0)[0]
	res := nodetest.MustApply(t, ctx, n, service.CancelCommand(&pb.CancelRequest{TaskId: task.GetId()}))
	if err := pb.ItemError(res.GetItems()[0]); !errors.Is(err, pb.ErrWrongState) {
		t.Fatalf("cancel of a running task before the latch: %v, want pb.ErrWrongState", err)
	}
}

// Test_LeaderTimesOutPastDeadline: the leader's timeout loop ends a claim
// past its execution deadline while its worker keeps heartbeating; the
// heartbeat past the deadline is refused with pb.ErrTimedOut.
func Test_LeaderTimesOutPastDeadline(t *testing.T) {
	n := nodetest.Cluster(t, 1)[0]
	testwait.For(t, 10*time.Second, "level 9 latched", func() bool { return n.FSM().EnabledLevel() >= fsm.LevelCancelRunning })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nodetest.MustApply(t, ctx, n, service.EnqueueCommand(&pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", TimeoutNs: int64(time.Second)}}}))
	task := nodetest.ClaimNow(t, ctx, n, "q", 0)[0]
	if task.GetDeadlineAt() == 0 {
		t.Fatalf("claimed without a deadline: %v", task)
	}
	hb := service.HeartbeatCommand([]*pb.HeartbeatItem{{TaskId: task.GetId(), Fence: task.GetFence(), LeaseNs: int64(time.Minute)}})
	var refused bool
	testwait.For(t, 10*time.Second, "the task to end FAILED", func() bool {
		if res, err := n.Service().Propose(ctx, hb); err == nil && errors.Is(pb.ItemError(res.GetItems()[0]), pb.ErrTimedOut) {
			refused = true
		}
		got, err := n.FSM().GetTask(task.GetId())
		return err == nil && got.GetState() == pb.TaskState_TASK_STATE_FAILED
	})
	got, _ := n.FSM().GetTask(task.GetId())
	if h := got.GetHistory(); len(h) != 1 || h[0].GetOutcome() != pb.AttemptOutcome_ATTEMPT_OUTCOME_TIMED_OUT {
		t.Fatalf("timed-out task %v", got)
	}
	if !refused && got.GetFinishedAt() > task.GetDeadlineAt()+int64(time.Second) {
		t.Fatal("no heartbeat was refused though the claim outlived its deadline by a second")
	}
}
