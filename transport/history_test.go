package transport

import (
	"testing"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// fencesOf is a task's fence, then its attempts' fences.
func fencesOf(t *pb.Task) []uint64 {
	out := []uint64{t.GetFence()}
	for _, a := range t.GetHistory() {
		out = append(out, a.GetFence())
	}
	return out
}

func wantFences(t *testing.T, what string, task *pb.Task, want ...uint64) {
	t.Helper()
	got := fencesOf(task)
	if len(got) != len(want) {
		t.Fatalf("%s: fences (task, attempts) %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: fences (task, attempts) %v, want %v", what, got, want)
		}
	}
}

// Test_HistoryFencesOverTheAPI: the attempt history reaches GetTask,
// WaitResult, ListDead and ListTasks over real gRPC under the fence rule
// (service.TaskFor): a reader sees no fence, an admin of the tenant the
// ended attempts' fences, nobody the running claim's, and a Claim's answer
// carries no history.
func Test_HistoryFencesOverTheAPI(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	if err := ts.node.Latch(ctx, fsm.LevelAttempts); err != nil {
		t.Fatal(err)
	}
	reader := mustToken(t, ts, []string{pb.RoleProducer, pb.RoleReader, pb.RoleWorker}, []string{"a"}, 0).GetSecret()
	admin := mustToken(t, ts, []string{pb.RoleReader, pb.RoleAdmin}, []string{"a"}, 0).GetSecret()
	if _, err := ts.q.Enqueue(as(ctx, reader), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a", MaxAttempts: 2}}}); err != nil {
		t.Fatal(err)
	}
	claim := func() *pb.Task {
		t.Helper()
		cl, err := ts.q.Claim(as(ctx, reader), &pb.ClaimRequest{Queue: "q", Tenant: "a", WorkerId: "w"})
		if err != nil || len(cl.GetTasks()) != 1 {
			t.Fatalf("claim: %v %v", cl, err)
		}
		return cl.GetTasks()[0]
	}
	first := claim()
	if _, err := ts.q.Nack(as(ctx, reader), &pb.NackRequest{TaskId: first.GetId(), Fence: first.GetFence(), Tenant: "a", Reason: "boom"}); err != nil {
		t.Fatal(err)
	}
	second := claim()
	if len(second.GetHistory()) != 0 {
		t.Fatalf("claim answer carries history %v", second.GetHistory())
	}
	get := func(secret string) *pb.Task {
		t.Helper()
		resp, err := ts.q.GetTask(as(ctx, secret), &pb.GetTaskRequest{TaskId: first.GetId(), Tenant: "a"})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetTask()
	}
	wantFences(t, "GetTask as reader, running", get(reader), 0, 0, 0)
	wantFences(t, "GetTask as admin, running", get(admin), 0, first.GetFence(), 0)
	if h := get(admin).GetHistory(); h[0].GetError() != "boom" || h[0].GetOutcome() != pb.AttemptOutcome_ATTEMPT_OUTCOME_NACKED {
		t.Fatalf("first attempt %v", h[0])
	}
	lt, err := ts.q.ListTasks(as(ctx, admin), &pb.ListTasksRequest{Queue: "q", Tenant: "a", State: pb.TaskState_TASK_STATE_RUNNING})
	if err != nil || len(lt.GetTasks()) != 1 {
		t.Fatalf("ListTasks: %v %v", lt, err)
	}
	wantFences(t, "ListTasks as admin", lt.GetTasks()[0], 0, first.GetFence(), 0)

	if _, err := ts.q.Nack(as(ctx, reader), &pb.NackRequest{TaskId: first.GetId(), Fence: second.GetFence(), Tenant: "a", Reason: "again"}); err != nil {
		t.Fatal(err)
	}
	wantFences(t, "GetTask as reader, dead", get(reader), 0, 0, 0)
	wantFences(t, "GetTask as admin, dead", get(admin), 0, first.GetFence(), second.GetFence())
	dead, err := ts.q.ListDead(as(ctx, admin), &pb.ListDeadRequest{Queue: "q", Tenant: "a"})
	if err != nil || len(dead.GetTasks()) != 1 {
		t.Fatalf("ListDead: %v %v", dead, err)
	}
	wantFences(t, "ListDead as admin", dead.GetTasks()[0], 0, first.GetFence(), second.GetFence())
	wr, err := ts.q.WaitResult(as(ctx, reader), &pb.WaitResultRequest{TaskId: first.GetId(), Tenant: "a"})
	if err != nil || !wr.GetDone() {
		t.Fatalf("WaitResult: %v %v", wr, err)
	}
	wantFences(t, "WaitResult as producer", wr.GetTask(), 0, 0, 0)
}
