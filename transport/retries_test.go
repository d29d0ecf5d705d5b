package transport

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_RetriesOverGRPC: a queue's retry policy, snooze, task update and
// reset through the API, some from a follower that forwards them.
func Test_RetriesOverGRPC(t *testing.T) {
	l := mustLeader(t, Config{})
	f := mustFollower(t, l.addr, Config{})
	ctx := testCtx(t)
	if err := l.node.Latch(ctx, fsm.LevelRetries); err != nil {
		t.Fatal(err)
	}
	policy := &pb.RetryPolicy{BaseNs: int64(time.Hour), Multiplier: 2}
	if r, err := f.q.SetQueueRetry(ctx, &pb.SetQueueRetryRequest{Queue: "q", HasRetry: true, Retry: policy}); err != nil || !r.GetChanged() {
		t.Fatalf("set retry: %v %v", r, err)
	}
	if r, err := l.q.SetQueueRetry(ctx, &pb.SetQueueRetryRequest{Queue: "q", HasRetry: true, Retry: policy}); err != nil || r.GetChanged() {
		t.Fatalf("second set retry: %v %v, want unchanged", r, err)
	}
	ids := mustEnqueue(t, l.q, &pb.NewTask{Queue: "q"}, &pb.NewTask{Queue: "q"})
	c := mustClaim(t, l.q, "q", 1)[0]
	if r, err := l.q.Nack(ctx, &pb.NackRequest{TaskId: c.GetId(), Fence: c.GetFence()}); err != nil || r.GetState() != pb.TaskState_TASK_STATE_DELAYED {
		t.Fatalf("nack under a policy: %v %v, want DELAYED", r, err)
	}

	c = mustClaim(t, l.q, "q", 1)[0]
	if c.GetId() != ids[1] {
		t.Fatalf("claimed %s, want %s", c.GetId(), ids[1])
	}
	r, err := f.q.Snooze(ctx, &pb.SnoozeRequest{TaskId: c.GetId(), Fence: c.GetFence(), DelayNs: int64(time.Minute)})
	if err != nil || r.GetState() != pb.TaskState_TASK_STATE_DELAYED {
		t.Fatalf("snooze: %v %v", r, err)
	}
	_, err = l.q.Snooze(ctx, &pb.SnoozeRequest{TaskId: c.GetId(), Fence: c.GetFence()})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonStaleFence, "")
	got, err := l.q.GetTask(ctx, &pb.GetTaskRequest{TaskId: c.GetId()})
	if err != nil || got.GetTask().GetAttempts() != 0 {
		t.Fatalf("snoozed task %v %v: want no attempt used", got, err)
	}

	// Move the snoozed task to now at priority 9: claimable at once.
	u, err := l.q.UpdateTask(ctx, &pb.UpdateTaskRequest{TaskId: c.GetId(), HasPriority: true, Priority: 9, RunAt: time.Now().UnixNano()})
	if err != nil || u.GetState() != pb.TaskState_TASK_STATE_PENDING {
		t.Fatalf("update: %v %v", u, err)
	}
	c = mustClaim(t, l.q, "q", 1)[0]
	_, err = f.q.UpdateTask(ctx, &pb.UpdateTaskRequest{TaskId: c.GetId(), HasPriority: true, Priority: 1})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonWrongState, "")
	_, err = l.q.UpdateTask(ctx, &pb.UpdateTaskRequest{TaskId: c.GetId()})
	wantErr(t, err, codes.InvalidArgument, "", "run_at")

	if r, err := l.q.ResetQueue(ctx, &pb.ResetQueueRequest{Queue: "q"}); err != nil || !r.GetChanged() {
		t.Fatalf("reset: %v %v", r, err)
	}
	if r, err := l.q.ResetQueue(ctx, &pb.ResetQueueRequest{Queue: "q"}); err != nil || r.GetChanged() {
		t.Fatalf("second reset: %v %v, want unchanged", r, err)
	}

	// Before the cluster latched level 12: FEATURE_DISABLED.
	l.node.SetEnabledLevel(fsm.LevelQueueControl)
	_, err = l.q.Snooze(ctx, &pb.SnoozeRequest{TaskId: c.GetId(), Fence: c.GetFence()})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonFeatureDisabled, "")
	_, err = l.q.SetQueueRetry(ctx, &pb.SetQueueRetryRequest{Queue: "q", HasRetry: true, Retry: policy})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonFeatureDisabled, "")
}

// Test_RetriesRoles: the queue's policy needs admin over its tenant;
// snooze a worker; a task update a producer or admin of the tenant.
func Test_RetriesRoles(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	worker := mustToken(t, ts, []string{pb.RoleWorker}, []string{"a"}, 0)
	producerB := mustToken(t, ts, []string{pb.RoleProducer}, []string{"b"}, 0)
	adminA := mustToken(t, ts, []string{pb.RoleAdmin}, []string{"a"}, 0)
	_, err := ts.q.SetQueueRetry(as(ctx, worker.GetSecret()), &pb.SetQueueRetryRequest{Queue: "q", Tenant: "a", HasDeadRetention: true})
	wantCode(t, "set retry as a worker", err, codes.PermissionDenied)
	_, err = ts.q.ResetQueue(as(ctx, worker.GetSecret()), &pb.ResetQueueRequest{Queue: "q", Tenant: "a"})
	wantCode(t, "reset as a worker", err, codes.PermissionDenied)
	_, err = ts.q.UpdateTask(as(ctx, producerB.GetSecret()), &pb.UpdateTaskRequest{TaskId: "x", Tenant: "a", HasPriority: true})
	wantCode(t, "update by b's producer", err, codes.PermissionDenied)
	_, err = ts.q.Snooze(as(ctx, adminA.GetSecret()), &pb.SnoozeRequest{TaskId: "x", Fence: 1, Tenant: "a"})
	wantCode(t, "snooze as an admin", err, codes.PermissionDenied)
	if _, err := ts.q.SetQueueRetry(as(ctx, adminA.GetSecret()), &pb.SetQueueRetryRequest{Queue: "q", Tenant: "a", HasDeadRetention: true, DeadRetentionNs: int64(time.Hour)}); err != nil {
		t.Fatalf("set retry by a's admin: %v", err)
	}
	_, err = ts.q.Snooze(as(ctx, worker.GetSecret()), &pb.SnoozeRequest{TaskId: "0000000000000001", Fence: 1, Tenant: "a"})
	wantCode(t, "snooze of an unknown task", err, codes.NotFound)
}
