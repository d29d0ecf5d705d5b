package transport

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// submitsOf are Submits that complete tasks under their fences.
func submitsOf(tasks []*pb.Task) []*pb.SubmitRequest {
	out := make([]*pb.SubmitRequest, len(tasks))
	for i, t := range tasks {
		out[i] = &pb.SubmitRequest{TaskId: t.GetId(), Fence: t.GetFence(), Outcome: pb.Outcome_OUTCOME_COMPLETED, Result: []byte("ok")}
	}
	return out
}

// Test_SubmitBatchClaimsTheNextTasksInItsEntry: a SubmitBatch with a claim
// completes its tasks and claims the next ones in one Raft entry. The
// claimed tasks run for the claim's worker and lease under the entry's
// index as their fence; at the end of the queue the claim takes what is
// left, and then it adds no Claim to the log at all.
func Test_SubmitBatchClaimsTheNextTasksInItsEntry(t *testing.T) {
	ts := mustLeader(t, Config{})
	ctx := testCtx(t)
	for range 5 {
		mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})
	}
	held := mustClaim(t, ts.q, "q", 2)
	batches, claims := ts.node.Proposed(pb.CommandType_COMMAND_TYPE_BATCH), ts.node.Runs(pb.CommandType_COMMAND_TYPE_CLAIM)
	claim := &pb.ClaimRequest{Queue: "q", WorkerId: "next", MaxTasks: 2, LeaseNs: int64(time.Minute)}
	resp, err := ts.q.SubmitBatch(ctx, &pb.SubmitBatchRequest{Items: submitsOf(held), Claim: claim})
	if err != nil {
		t.Fatalf("submit batch with a claim: %v", err)
	}
	for i, it := range resp.GetItems() {
		if it.GetCode() != pb.Code_CODE_OK || it.GetState() != pb.TaskState_TASK_STATE_COMPLETED {
			t.Fatalf("item %d: %v, want OK and COMPLETED", i, it)
		}
	}
	if n := ts.node.Proposed(pb.CommandType_COMMAND_TYPE_BATCH) - batches; n != 1 {
		t.Fatalf("%d Batch entries, want the one", n)
	}
	if n := ts.node.Runs(pb.CommandType_COMMAND_TYPE_CLAIM) - claims; n != 1 {
		t.Fatalf("%d Claims ran, want 1, inside the Batch", n)
	}
	next := resp.GetTasks()
	if len(next) != 2 {
		t.Fatalf("claimed %d tasks, want 2", len(next))
	}
	for _, task := range next {
		stored, err := ts.node.FSM().GetTask(task.GetId())
		if err != nil || stored.GetState() != pb.TaskState_TASK_STATE_RUNNING || stored.GetWorkerId() != "next" ||
			stored.GetFence() != task.GetFence() || task.GetFence() != next[0].GetFence() || task.GetLeaseNs() != int64(time.Minute) {
			t.Fatalf("claimed task %v, stored %v (%v): want running for next, one fence for the entry, lease 1m", task, stored, err)
		}
		if task.GetFence() <= held[0].GetFence() {
			t.Fatalf("fence %d not above the earlier claim's %d", task.GetFence(), held[0].GetFence())
		}
	}

	// The last task, then nothing: the replica shows no task to claim, so
	// the entry holds the submits alone.
	resp, err = ts.q.SubmitBatch(ctx, &pb.SubmitBatchRequest{Items: submitsOf(next), Claim: claim})
	if err != nil || len(resp.GetTasks()) != 1 {
		t.Fatalf("second step: %v, %v; want the last task", resp, err)
	}
	claims = ts.node.Runs(pb.CommandType_COMMAND_TYPE_CLAIM)
	resp, err = ts.q.SubmitBatch(ctx, &pb.SubmitBatchRequest{Items: submitsOf(resp.GetTasks()), Claim: claim})
	if err != nil || len(resp.GetTasks()) != 0 || resp.GetItems()[0].GetCode() != pb.Code_CODE_OK {
		t.Fatalf("last step: %v, %v; want the submit and no task", resp, err)
	}
	if n := ts.node.Runs(pb.CommandType_COMMAND_TYPE_CLAIM) - claims; n != 0 {
		t.Fatalf("%d Claims ran on an empty queue, want none", n)
	}
	st, err := ts.q.Stats(ctx, &pb.StatsRequest{Queue: "q"})
	if err != nil || len(st.GetQueues()) != 1 || st.GetQueues()[0].GetCompleted() != 5 {
		t.Fatalf("stats %v, %v; want 5 completed", st, err)
	}
}

// Test_SubmitBatchClaimRefusals: a claim that waits or is bad fails the
// whole call with its field named under claim., and nothing applies: the
// submits' task still runs.
func Test_SubmitBatchClaimRefusals(t *testing.T) {
	ts := mustLeader(t, Config{})
	ctx := testCtx(t)
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"}, &pb.NewTask{Queue: "q"})
	held := mustClaim(t, ts.q, "q", 1)
	for _, c := range []struct {
		name  string
		claim *pb.ClaimRequest
		field string
	}{
		{"a wait", &pb.ClaimRequest{Queue: "q", WorkerId: "w", WaitNs: int64(time.Second)}, "claim.wait_ns"},
		{"no queue", &pb.ClaimRequest{WorkerId: "w"}, "claim.queue"},
		{"too many", &pb.ClaimRequest{Queue: "q", WorkerId: "w", MaxTasks: pb.MaxBatch + 1}, "claim.max_tasks"},
	} {
		_, err := ts.q.SubmitBatch(ctx, &pb.SubmitBatchRequest{Items: submitsOf(held), Claim: c.claim})
		wantErr(t, err, codes.InvalidArgument, "", c.field)
	}
	if got, err := ts.node.FSM().GetTask(held[0].GetId()); err != nil || got.GetState() != pb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("the submitted task is %v (%v) after refused calls, want RUNNING", got.GetState(), err)
	}
}

// Test_SubmitBatchClaimHeldToTheTenant: a worker token of one tenant may
// not claim another tenant's tasks by adding a claim to its submits.
func Test_SubmitBatchClaimHeldToTheTenant(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	a := mustToken(t, ts, []string{pb.RoleProducer, pb.RoleWorker}, []string{"a"}, 0)
	for _, tn := range []string{"a", "b"} {
		if _, err := ts.q.Enqueue(as(ctx, adminSecret), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: tn}, {Queue: "q", Tenant: tn}}}); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := ts.q.Claim(as(ctx, a.GetSecret()), &pb.ClaimRequest{Queue: "q", Tenant: "a", WorkerId: "w", MaxTasks: 1})
	if err != nil || len(cl.GetTasks()) != 1 {
		t.Fatalf("claim: %v %v", cl, err)
	}
	subs := submitsOf(cl.GetTasks())
	subs[0].Tenant = "a"
	_, err = ts.q.SubmitBatch(as(ctx, a.GetSecret()), &pb.SubmitBatchRequest{Items: subs,
		Claim: &pb.ClaimRequest{Queue: "q", Tenant: "b", WorkerId: "w"}})
	wantCode(t, "a's submits claiming from b", err, codes.PermissionDenied)
	resp, err := ts.q.SubmitBatch(as(ctx, a.GetSecret()), &pb.SubmitBatchRequest{Items: subs,
		Claim: &pb.ClaimRequest{Queue: "q", Tenant: "a", WorkerId: "w"}})
	if err != nil || len(resp.GetTasks()) != 1 || resp.GetTasks()[0].GetTenant() != "a" {
		t.Fatalf("a's submits claiming from a: %v, %v; want a's other task", resp, err)
	}
}

// Test_SubmitBatchClaimOfACallerGoneIsReleased: when the caller of a
// SubmitBatch with a claim is gone by the time its entry applies, the
// submits stand and the claimed task goes back to pending without an
// attempt, as an undelivered Claim's does.
func Test_SubmitBatchClaimOfACallerGoneIsReleased(t *testing.T) {
	ts := mustLeader(t, Config{})
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})
	held := mustClaim(t, ts.q, "q", 1)
	ids := mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})
	ts.node.ApplyLate(true)
	release := ts.node.Hold()
	dl := time.Now().Add(200 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	_, err := ts.q.SubmitBatch(ctx, &pb.SubmitBatchRequest{Items: submitsOf(held),
		Claim: &pb.ClaimRequest{Queue: "q", WorkerId: "gone", MaxTasks: 1}})
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("submit batch whose caller left: %v", err)
	}
	testwait.For(t, 10*time.Second, "the server's deadline", func() bool { return time.Now().After(dl.Add(100 * time.Millisecond)) })
	release()
	testwait.For(t, 10*time.Second, "the claim of a caller gone to be released", func() bool {
		task, err := ts.node.FSM().GetTask(ids[0])
		return err == nil && task.GetState() == pb.TaskState_TASK_STATE_PENDING && task.GetClaims() == 1
	})
	if task, _ := ts.node.FSM().GetTask(ids[0]); task.GetAttempts() != 0 {
		t.Fatalf("released task has %d attempts, want 0", task.GetAttempts())
	}
	if got, err := ts.node.FSM().GetTask(held[0].GetId()); err != nil || got.GetState() != pb.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("the submitted task is %v (%v), want COMPLETED", got.GetState(), err)
	}
}

// FuzzSubmitBatchClaim feeds SubmitBatch arbitrary requests with a claim,
// on a node whose queues are empty: the call is refused with
// InvalidArgument, or it answers one item per submit (none of the tasks
// exists) and claims nothing. It never fails otherwise.
func FuzzSubmitBatchClaim(f *testing.F) {
	seed := func(claim *pb.ClaimRequest, items ...*pb.SubmitRequest) {
		b, err := proto.Marshal(&pb.SubmitBatchRequest{Items: items, Claim: claim})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	done := &pb.SubmitRequest{TaskId: "0000000000000000000a", Fence: 3, Outcome: pb.Outcome_OUTCOME_COMPLETED}
	seed(&pb.ClaimRequest{Queue: "q", WorkerId: "w", MaxTasks: 10}, done)
	seed(&pb.ClaimRequest{Queue: "q", WaitNs: 1}, done)
	seed(&pb.ClaimRequest{}, done, &pb.SubmitRequest{TaskId: "x", Outcome: pb.Outcome_OUTCOME_FAILED, Error: "e"})
	seed(&pb.ClaimRequest{Queue: "q", LeaseNs: -1, MaxTasks: 1 << 31})
	seed(&pb.ClaimRequest{Queue: "q", Tenant: "t"}, &pb.SubmitRequest{TaskId: "y", Outcome: 99})

	ts := mustServe(f, newMemNode(f, true, service.ServiceConfig{}), "", Config{})
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &pb.SubmitBatchRequest{}
		if proto.Unmarshal(data, req) != nil || req.GetClaim() == nil {
			return // the codec refuses it, or it is a plain SubmitBatch
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := ts.q.SubmitBatch(ctx, req)
		switch {
		case err != nil && status.Code(err) != codes.InvalidArgument:
			t.Fatalf("SubmitBatch with a claim failed with %v, want InvalidArgument or an answer", err)
		case err == nil && len(resp.GetItems()) != len(req.GetItems()):
			t.Fatalf("%d answers for %d submits", len(resp.GetItems()), len(req.GetItems()))
		case len(resp.GetTasks()) != 0:
			t.Fatalf("claimed %d tasks from a node that holds none", len(resp.GetTasks()))
		}
	})
}

// Test_SubmitBatchClaimAtALimitTakesWhatItsSubmitsFree: on a queue at its
// running limit, or a key at its per-key limit, the submits of the call
// end running tasks, and the claim after them in the same entry takes the
// slots they free. The leader's view before the entry shows nothing to
// claim; the claim must still ride, or every worker of a limited queue
// pays a second round for each task.
func Test_SubmitBatchClaimAtALimitTakesWhatItsSubmitsFree(t *testing.T) {
	for _, c := range []struct {
		name   string
		limits *pb.SetQueueLimitsRequest
		key    []byte
	}{
		{"queue limit", &pb.SetQueueLimitsRequest{Queue: "q", MaxRunning: u32p(2)}, nil},
		{"tenant limit", &pb.SetQueueLimitsRequest{MaxRunning: u32p(2)}, nil},
		{"key limit", &pb.SetQueueLimitsRequest{Queue: "q", MaxRunningPerKey: u32p(2), Order: orderp(pb.QueueOrder_QUEUE_ORDER_FAIR)}, []byte("acme")},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := mustLeader(t, Config{})
			ctx := testCtx(t)
			if err := ts.node.Latch(ctx, fsm.LevelFairQueues); err != nil {
				t.Fatal(err)
			}
			if _, err := ts.q.SetQueueLimits(ctx, c.limits); err != nil {
				t.Fatalf("set limits: %v", err)
			}
			for range 5 {
				mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q", Key: c.key})
			}
			first, err := ts.q.Claim(ctx, &pb.ClaimRequest{Queue: "q", WorkerId: "w1", MaxTasks: 5})
			held := first.GetTasks()
			if err != nil || len(held) != 2 {
				t.Fatalf("claimed %d (%v) at a limit of 2, want 2", len(held), err)
			}
			claims := ts.node.Runs(pb.CommandType_COMMAND_TYPE_CLAIM)
			claim := &pb.ClaimRequest{Queue: "q", WorkerId: "next", MaxTasks: 5, LeaseNs: int64(time.Minute)}
			resp, err := ts.q.SubmitBatch(ctx, &pb.SubmitBatchRequest{Items: submitsOf(held), Claim: claim})
			if err != nil {
				t.Fatalf("submit batch with a claim: %v", err)
			}
			if n := ts.node.Runs(pb.CommandType_COMMAND_TYPE_CLAIM) - claims; n != 1 {
				t.Fatalf("%d Claims ran, want the one riding on the submits", n)
			}
			if got := len(resp.GetTasks()); got != 2 {
				t.Fatalf("the ride claimed %d tasks, want the 2 its submits freed", got)
			}
			// The limit holds: what runs now is the ride's two, and a
			// ride whose submit frees nothing takes nothing.
			resp, err = ts.q.SubmitBatch(ctx, &pb.SubmitBatchRequest{Items: []*pb.SubmitRequest{{TaskId: "gone", Fence: 1,
				Outcome: pb.Outcome_OUTCOME_COMPLETED}}, Claim: claim})
			if err != nil || len(resp.GetTasks()) != 0 {
				t.Fatalf("a ride that frees nothing: %v, %v; want no task", resp, err)
			}
			st, err := ts.q.Stats(ctx, &pb.StatsRequest{Queue: "q"})
			if err != nil || len(st.GetQueues()) != 1 || st.GetQueues()[0].GetRunning() != 2 {
				t.Fatalf("stats %v, %v; want 2 running at the limit", st, err)
			}
		})
	}
}
