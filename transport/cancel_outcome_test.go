package transport

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_SubmitAfterCancelOverGRPC: from feature level 15 a worker's Submit
// on a task cancelled while its claim ran fails FailedPrecondition with
// reason CANCELLED, through a follower too, and WaitResult reports the
// task CANCELLED with outcome CANCELLED and no result; SubmitBatch answers
// the item CODE_CANCELLED.
func Test_SubmitAfterCancelOverGRPC(t *testing.T) {
	l := mustLeader(t, Config{})
	f := mustFollower(t, l.addr, Config{})
	ctx := testCtx(t)
	if err := l.node.Latch(ctx, fsm.LevelCancelledOutcome); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, l.q, &pb.NewTask{Queue: "q"}, &pb.NewTask{Queue: "q"})
	tasks := mustClaim(t, l.q, "q", 2)
	for _, task := range tasks {
		if _, err := l.q.Cancel(ctx, &pb.CancelRequest{TaskId: task.GetId()}); err != nil {
			t.Fatal(err)
		}
	}
	one := tasks[0]
	submit := &pb.SubmitRequest{TaskId: one.GetId(), Fence: one.GetFence(), Outcome: pb.Outcome_OUTCOME_COMPLETED, Result: []byte("42")}
	_, err := f.q.Submit(ctx, submit)
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonCancelled, "")
	_, err = l.q.Submit(ctx, submit) // a retry hears the same
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonCancelled, "")
	w, err := f.q.WaitResult(ctx, &pb.WaitResultRequest{TaskId: one.GetId(), WaitNs: 1})
	if err != nil || !w.GetDone() || w.GetTask().GetState() != pb.TaskState_TASK_STATE_CANCELLED ||
		w.GetTask().GetOutcome() != pb.Outcome_OUTCOME_CANCELLED || len(w.GetTask().GetResult()) != 0 {
		t.Fatalf("WaitResult of the cancelled task: %v %v", w, err)
	}
	two := tasks[1]
	b, err := l.q.SubmitBatch(ctx, &pb.SubmitBatchRequest{Items: []*pb.SubmitRequest{
		{TaskId: two.GetId(), Fence: two.GetFence(), Outcome: pb.Outcome_OUTCOME_COMPLETED}}})
	if err != nil || b.GetItems()[0].GetCode() != pb.Code_CODE_CANCELLED {
		t.Fatalf("SubmitBatch of a cancelled claim: %v %v", b, err)
	}
}
