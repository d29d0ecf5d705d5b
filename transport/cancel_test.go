package transport

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_CancelRunningOverGRPC: Cancel of a running task through a
// follower answers cancel_requested, the worker's Heartbeat answer says
// so, and its Nack ends the task CANCELLED; a heartbeat past a task's
// execution deadline is refused TIMED_OUT; before level 9 a timeout is
// FEATURE_DISABLED.
func Test_CancelRunningOverGRPC(t *testing.T) {
	l := mustLeader(t, Config{})
	f := mustFollower(t, l.addr, Config{})
	ctx := testCtx(t)
	if err := l.node.Latch(ctx, fsm.LevelCancelRunning); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, l.q, &pb.NewTask{Queue: "q"})
	task := mustClaim(t, l.q, "q", 1)[0]
	r, err := f.q.Cancel(ctx, &pb.CancelRequest{TaskId: task.GetId()})
	if err != nil || !r.GetCancelRequested() || r.GetState() != pb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("cancel of a running task: %v %v", r, err)
	}
	hb, err := l.q.Heartbeat(ctx, &pb.HeartbeatRequest{Items: []*pb.HeartbeatItem{{TaskId: task.GetId(), Fence: task.GetFence()}}})
	if err != nil || !hb.GetItems()[0].GetCancelRequested() {
		t.Fatalf("heartbeat after the cancel: %v %v", hb, err)
	}
	n, err := l.q.Nack(ctx, &pb.NackRequest{TaskId: task.GetId(), Fence: task.GetFence(), Reason: "stopped"})
	if err != nil || n.GetState() != pb.TaskState_TASK_STATE_CANCELLED {
		t.Fatalf("nack after the cancel: %v %v", n, err)
	}

	mustEnqueue(t, l.q, &pb.NewTask{Queue: "t", TimeoutNs: 1})
	timed := mustClaim(t, l.q, "t", 1)[0]
	hb, err = l.q.Heartbeat(ctx, &pb.HeartbeatRequest{Items: []*pb.HeartbeatItem{{TaskId: timed.GetId(), Fence: timed.GetFence()}}})
	if err != nil || hb.GetItems()[0].GetCode() != pb.Code_CODE_TIMED_OUT {
		t.Fatalf("heartbeat past the deadline: %v %v", hb, err)
	}

	l.node.SetEnabledLevel(fsm.LevelQueueControl)
	_, err = l.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "t", TimeoutNs: 1}}})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonFeatureDisabled, "")
}
