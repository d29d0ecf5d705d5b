package transport

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_DependenciesOverGRPC: a DAG enqueued through a follower waits; the
// child is claimable once its parent completed, and its worker reads the
// parent's result; an unknown parent and a forward reference are both
// InvalidArgument naming the field, and before level 11 FEATURE_DISABLED.
func Test_DependenciesOverGRPC(t *testing.T) {
	l := mustLeader(t, Config{})
	f := mustFollower(t, l.addr, Config{})
	ctx := testCtx(t)
	if err := l.node.Latch(ctx, fsm.LevelDependencies); err != nil {
		t.Fatal(err)
	}
	ids := mustEnqueue(t, f.q, &pb.NewTask{Queue: "q"}, &pb.NewTask{Queue: "q", AfterIndex: []uint32{0}})
	got, err := l.q.GetTask(ctx, &pb.GetTaskRequest{TaskId: ids[1]})
	if err != nil || got.GetTask().GetState() != pb.TaskState_TASK_STATE_WAITING || got.GetTask().GetParents()[0] != ids[0] {
		t.Fatalf("child: %v %v", got, err)
	}
	lt, err := f.q.ListTasks(ctx, &pb.ListTasksRequest{Queue: "q", State: pb.TaskState_TASK_STATE_WAITING})
	if err != nil || len(lt.GetTasks()) != 1 || lt.GetTasks()[0].GetId() != ids[1] {
		t.Fatalf("list waiting: %v %v", lt, err)
	}
	st, err := l.q.Stats(ctx, &pb.StatsRequest{Queue: "q"})
	if err != nil || st.GetQueues()[0].GetWaiting() != 1 {
		t.Fatalf("stats: %v %v", st, err)
	}
	resp, err := l.q.Claim(ctx, &pb.ClaimRequest{Queue: "q", WorkerId: "w1", MaxTasks: 5})
	p := resp.GetTasks()
	if err != nil || len(p) != 1 || p[0].GetId() != ids[0] {
		t.Fatalf("first claim %v %v: the waiting child must not be claimable", p, err)
	}
	if _, err := l.q.Submit(ctx, &pb.SubmitRequest{TaskId: ids[0], Fence: p[0].GetFence(), Outcome: pb.Outcome_OUTCOME_COMPLETED, Result: []byte("42")}); err != nil {
		t.Fatal(err)
	}
	c := mustClaim(t, l.q, "q", 1)
	if c[0].GetId() != ids[1] || len(c[0].GetParents()) != 1 {
		t.Fatalf("second claim %v", c)
	}
	pr, err := f.q.ParentResults(ctx, &pb.ParentResultsRequest{TaskId: ids[1]})
	if err != nil || len(pr.GetParents()) != 1 || string(pr.GetParents()[0].GetResult()) != "42" ||
		pr.GetParents()[0].GetState() != pb.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("parent results: %v %v", pr, err)
	}
	_, err = l.q.ParentResults(ctx, &pb.ParentResultsRequest{TaskId: ids[1], Tenant: "other"})
	wantCode(t, "another tenant's parent results", err, codes.NotFound)

	_, err = l.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", After: []string{"00000000000099990000"}}}})
	wantErr(t, err, codes.InvalidArgument, "", "tasks[0].after")
	_, err = l.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", AfterIndex: []uint32{0}}}})
	wantErr(t, err, codes.InvalidArgument, "", "tasks[0].after_index")

	l.node.SetEnabledLevel(fsm.LevelQueueControl)
	_, err = l.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", After: []string{ids[0]}}}})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonFeatureDisabled, "")
	if _, err := l.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}}); err != nil {
		t.Fatalf("a plain enqueue needs no level: %v", err)
	}
}

// Test_ParentResultsNeedsARole: a worker, producer or reader of the
// task's tenant may read its parents; a token of another tenant may not.
func Test_ParentResultsNeedsARole(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	if err := ts.node.Latch(ctx, fsm.LevelDependencies); err != nil {
		t.Fatal(err)
	}
	prod := mustToken(t, ts, []string{pb.RoleProducer}, []string{"a"}, 0)
	worker := mustToken(t, ts, []string{pb.RoleWorker}, []string{"a"}, 0)
	otherWorker := mustToken(t, ts, []string{pb.RoleWorker}, []string{"b"}, 0)
	res, err := ts.q.Enqueue(as(ctx, prod.GetSecret()), &pb.EnqueueRequest{Tasks: []*pb.NewTask{
		{Queue: "q", Tenant: "a"}, {Queue: "q", Tenant: "a", AfterIndex: []uint32{0}}}})
	if err != nil {
		t.Fatal(err)
	}
	child := res.GetItems()[1].GetTaskId()
	if _, err := ts.q.ParentResults(as(ctx, worker.GetSecret()), &pb.ParentResultsRequest{TaskId: child, Tenant: "a"}); err != nil {
		t.Fatalf("worker of a: %v", err)
	}
	_, err = ts.q.ParentResults(as(ctx, otherWorker.GetSecret()), &pb.ParentResultsRequest{TaskId: child, Tenant: "a"})
	wantCode(t, "worker of b", err, codes.PermissionDenied)
	_, err = ts.q.ParentResults(as(ctx, otherWorker.GetSecret()), &pb.ParentResultsRequest{TaskId: child, Tenant: "b"})
	wantCode(t, "worker of b naming b", err, codes.NotFound)
}
