package transport

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// claimItem is one ClaimBatch item of worker w, with a lease of lease.
func claimItem(queue, w string, max uint32, lease time.Duration) *pb.ClaimRequest {
	return &pb.ClaimRequest{Queue: queue, WorkerId: w, MaxTasks: max, LeaseNs: int64(lease)}
}

// Test_ClaimBatchAnswersEachItem: every item is its own Claim, answered in
// its place, with its own worker and lease on the tasks it got; an item
// of an empty queue gets nothing, and no task goes to two items.
func Test_ClaimBatchAnswersEachItem(t *testing.T) {
	ts := mustLeader(t, Config{})
	for i := range 6 {
		mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q", Payload: []byte(fmt.Sprint(i))})
	}
	items := []*pb.ClaimRequest{
		claimItem("q", "w0", 1, time.Minute),
		claimItem("q", "w1", 3, 2*time.Minute),
		claimItem("empty", "w2", 2, 3*time.Minute),
		claimItem("q", "w3", 2, 4*time.Minute),
	}
	want := []int{1, 3, 0, 2}
	resp, err := ts.q.ClaimBatch(testCtx(t), &pb.ClaimBatchRequest{Items: items})
	if err != nil {
		t.Fatalf("claim batch: %v", err)
	}
	if len(resp.GetItems()) != len(items) {
		t.Fatalf("%d answers for %d items", len(resp.GetItems()), len(items))
	}
	seen := map[string]string{}
	for i, it := range resp.GetItems() {
		if len(it.GetTasks()) != want[i] {
			t.Fatalf("item %d got %d tasks, want %d", i, len(it.GetTasks()), want[i])
		}
		for _, task := range it.GetTasks() {
			if w, dup := seen[task.GetId()]; dup {
				t.Fatalf("task %s went to %s and %s", task.GetId(), w, items[i].GetWorkerId())
			}
			seen[task.GetId()] = items[i].GetWorkerId()
			if task.GetWorkerId() != items[i].GetWorkerId() || task.GetLeaseNs() != items[i].GetLeaseNs() || task.GetFence() == 0 {
				t.Fatalf("item %d's task: worker %q lease %v fence %d; want %q, %v and a fence",
					i, task.GetWorkerId(), time.Duration(task.GetLeaseNs()), task.GetFence(), items[i].GetWorkerId(), time.Duration(items[i].GetLeaseNs()))
			}
			stored, err := ts.node.FSM().GetTask(task.GetId())
			if err != nil || stored.GetState() != pb.TaskState_TASK_STATE_RUNNING || stored.GetWorkerId() != items[i].GetWorkerId() ||
				stored.GetFence() != task.GetFence() {
				t.Fatalf("stored task %v (%v), want running for %s under fence %d", stored, err, items[i].GetWorkerId(), task.GetFence())
			}
		}
	}
}

// Test_ClaimBatchRefusals: a batch that waits, is empty, claims more than
// one Claim may, or holds a bad item is InvalidArgument naming the field,
// and claims nothing.
func Test_ClaimBatchRefusals(t *testing.T) {
	ts := mustLeader(t, Config{})
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})
	many := make([]*pb.ClaimRequest, 3)
	for i := range many {
		many[i] = claimItem("q", "w", 400, 0)
	}
	for _, c := range []struct {
		name  string
		items []*pb.ClaimRequest
		field string
	}{
		{"a wait", []*pb.ClaimRequest{claimItem("q", "w", 1, 0), {Queue: "q", WorkerId: "w", WaitNs: int64(time.Second)}}, "items[1].wait_ns"},
		{"no items", nil, "items"},
		{"too many tasks", many, "items"},
		{"no worker", []*pb.ClaimRequest{claimItem("q", "w", 1, 0), claimItem("q", "", 1, 0)}, "items[1].worker_id"},
		{"no queue", []*pb.ClaimRequest{claimItem("", "w", 1, 0)}, "items[0].queue"},
	} {
		_, err := ts.q.ClaimBatch(testCtx(t), &pb.ClaimBatchRequest{Items: c.items})
		wantErr(t, err, codes.InvalidArgument, "", c.field)
	}
	if n := ts.node.Runs(pb.CommandType_COMMAND_TYPE_CLAIM); n != 0 {
		t.Fatalf("%d claims ran for refused batches", n)
	}
}

// Test_ClaimBatchAuth: ClaimBatch is a worker's, over every item's tenant.
func Test_ClaimBatchAuth(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	if _, err := ts.q.Enqueue(as(ctx, adminSecret), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a"}, {Queue: "q", Tenant: "b"}}}); err != nil {
		t.Fatal(err)
	}
	wa := mustToken(t, ts, []string{pb.RoleWorker}, []string{"a"}, 0)
	pa := mustToken(t, ts, []string{pb.RoleProducer}, []string{"a"}, 0)
	both := &pb.ClaimBatchRequest{Items: []*pb.ClaimRequest{
		{Queue: "q", Tenant: "a", WorkerId: "w"}, {Queue: "q", Tenant: "b", WorkerId: "w"},
	}}
	_, err := ts.q.ClaimBatch(ctx, both)
	wantCode(t, "claim batch without a token", err, codes.Unauthenticated)
	_, err = ts.q.ClaimBatch(as(ctx, wa.GetSecret()), both)
	wantCode(t, "claim batch from b with a's token", err, codes.PermissionDenied)
	own := &pb.ClaimBatchRequest{Items: []*pb.ClaimRequest{{Queue: "q", Tenant: "a", WorkerId: "w"}}}
	_, err = ts.q.ClaimBatch(as(ctx, pa.GetSecret()), own)
	wantCode(t, "claim batch with a producer token", err, codes.PermissionDenied)
	if n := ts.node.Runs(pb.CommandType_COMMAND_TYPE_CLAIM); n != 0 {
		t.Fatalf("%d claims ran for refused batches", n)
	}
	// An item without a tenant is the default tenant's, which a's token
	// does not cover.
	_, err = ts.q.ClaimBatch(as(ctx, wa.GetSecret()), &pb.ClaimBatchRequest{Items: []*pb.ClaimRequest{{Queue: "q", WorkerId: "w"}}})
	wantCode(t, "claim batch from the default tenant with a's token", err, codes.PermissionDenied)

	resp, err := ts.q.ClaimBatch(as(ctx, wa.GetSecret()), own)
	if err != nil {
		t.Fatalf("own tenant: %v", err)
	}
	if got := resp.GetItems()[0].GetTasks(); len(got) != 1 || got[0].GetTenant() != "a" || got[0].GetFence() == 0 {
		t.Fatalf("claimed %v, want a's task with its fence", got)
	}
}

// Test_ClaimBatchForwardedFromFollower: a follower forwards the whole
// batch to the leader.
func Test_ClaimBatchForwardedFromFollower(t *testing.T) {
	leader := mustLeader(t, Config{})
	follower := mustFollower(t, leader.addr, Config{})
	ids := mustEnqueue(t, leader.q, &pb.NewTask{Queue: "q"}, &pb.NewTask{Queue: "q"})
	resp, err := follower.q.ClaimBatch(testCtx(t), &pb.ClaimBatchRequest{Items: []*pb.ClaimRequest{
		claimItem("q", "w0", 1, 0), claimItem("q", "w1", 1, 0),
	}})
	if err != nil {
		t.Fatalf("claim batch via follower: %v", err)
	}
	got := map[string]bool{}
	for i, it := range resp.GetItems() {
		if len(it.GetTasks()) != 1 || it.GetTasks()[0].GetWorkerId() != fmt.Sprint("w", i) {
			t.Fatalf("item %d: %v", i, it.GetTasks())
		}
		got[it.GetTasks()[0].GetId()] = true
	}
	if !got[ids[0]] || !got[ids[1]] {
		t.Fatalf("claimed %v, want %v", got, ids)
	}
}

// Test_ClaimBatchAnswerStaysWithinLimit: items past the answer limit are
// answered empty, and their tasks are put back at once, without an
// attempt, for the next claim.
func Test_ClaimBatchAnswerStaysWithinLimit(t *testing.T) {
	const payload = 64 << 10
	// Room for two items of one task each, not three.
	ts := mustLeader(t, Config{answerLimit: 2*payload + 8<<10})
	for range 4 {
		mustEnqueue(t, ts.q, &pb.NewTask{Queue: "big", Payload: bytes.Repeat([]byte{'p'}, payload)})
	}
	items := []*pb.ClaimRequest{
		claimItem("big", "w0", 1, 0), claimItem("big", "w1", 1, 0), claimItem("big", "w2", 1, 0), claimItem("big", "w3", 1, 0),
	}
	resp, err := ts.q.ClaimBatch(testCtx(t), &pb.ClaimBatchRequest{Items: items})
	if err != nil {
		t.Fatalf("claim batch: %v", err)
	}
	for i, it := range resp.GetItems() {
		if want := map[bool]int{true: 1, false: 0}[i < 2]; len(it.GetTasks()) != want {
			t.Fatalf("item %d got %d tasks, want %d", i, len(it.GetTasks()), want)
		}
	}
	testwait.For(t, 10*time.Second, "the cut items' tasks to be released", func() bool {
		st, err := ts.node.FSM().Stats("big", pb.DefaultTenant)
		return err == nil && len(st) == 1 && st[0].GetPending() == 2 && st[0].GetRunning() == 2
	})
	again, err := ts.q.Claim(testCtx(t), &pb.ClaimRequest{Queue: "big", WorkerId: "w4", MaxTasks: 2})
	if err != nil || len(again.GetTasks()) != 2 {
		t.Fatalf("claim after the release: %v, %v", again.GetTasks(), err)
	}
	for _, task := range again.GetTasks() {
		if task.GetAttempts() != 0 || task.GetClaims() != 2 {
			t.Fatalf("released task has %d attempts and %d claims, want 0 and 2", task.GetAttempts(), task.GetClaims())
		}
	}
}

// Test_UndeliveredClaimBatchIsReleased: when gRPC cannot send a
// ClaimBatch answer, claimWatch puts every item's tasks back.
func Test_UndeliveredClaimBatchIsReleased(t *testing.T) {
	// A send limit below one task's answer: the handler answers, gRPC
	// refuses to send it.
	ts := mustLeader(t, Config{ServerOptions: []grpc.ServerOption{grpc.MaxSendMsgSize(4 << 10)}})
	ids := mustEnqueue(t, ts.q,
		&pb.NewTask{Queue: "q", Payload: bytes.Repeat([]byte{'p'}, 8<<10)},
		&pb.NewTask{Queue: "q", Payload: bytes.Repeat([]byte{'p'}, 8<<10)})
	_, err := ts.q.ClaimBatch(testCtx(t), &pb.ClaimBatchRequest{Items: []*pb.ClaimRequest{
		claimItem("q", "w0", 1, time.Hour), claimItem("q", "w1", 1, time.Hour),
	}})
	wantCode(t, "claim batch whose answer cannot be sent", err, codes.ResourceExhausted)
	testwait.For(t, 10*time.Second, "both tasks to be released", func() bool {
		for _, id := range ids {
			task, err := ts.node.FSM().GetTask(id)
			if err != nil || task.GetState() != pb.TaskState_TASK_STATE_PENDING || task.GetClaims() != 1 || task.GetAttempts() != 0 {
				return false
			}
		}
		return true
	})
}
