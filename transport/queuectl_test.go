package transport

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_QueueControlOverGRPC: pause, resume and purge through the API,
// from a follower that forwards them, with Stats showing the pause.
func Test_QueueControlOverGRPC(t *testing.T) {
	l := mustLeader(t, Config{})
	f := mustFollower(t, l.addr, Config{})
	ctx := testCtx(t)
	ids := mustEnqueue(t, l.q, &pb.NewTask{Queue: "q"}, &pb.NewTask{Queue: "q"})
	if r, err := f.q.PauseQueue(ctx, &pb.PauseQueueRequest{Queue: "q"}); err != nil || !r.GetChanged() {
		t.Fatalf("pause: %v %v", r, err)
	}
	if r, err := l.q.PauseQueue(ctx, &pb.PauseQueueRequest{Queue: "q"}); err != nil || r.GetChanged() {
		t.Fatalf("second pause: %v %v, want unchanged", r, err)
	}
	if resp, err := l.q.Claim(ctx, &pb.ClaimRequest{Queue: "q", WorkerId: "w"}); err != nil || len(resp.GetTasks()) != 0 {
		t.Fatalf("claim of a paused queue: %v %v", resp, err)
	}
	st, err := l.q.Stats(ctx, &pb.StatsRequest{Queue: "q"})
	if err != nil || len(st.GetQueues()) != 1 || !st.GetQueues()[0].GetPaused() {
		t.Fatalf("stats: %v %v", st, err)
	}
	if r, err := f.q.ResumeQueue(ctx, &pb.ResumeQueueRequest{Queue: "q"}); err != nil || !r.GetChanged() {
		t.Fatalf("resume: %v %v", r, err)
	}
	if got := mustClaim(t, l.q, "q", 1); got[0].GetId() != ids[0] {
		t.Fatalf("claim after resume took %s, want %s", got[0].GetId(), ids[0])
	}
	if r, err := f.q.PurgeQueue(ctx, &pb.PurgeQueueRequest{Queue: "q"}); err != nil || r.GetPurged() != 1 {
		t.Fatalf("purge: %v %v, want 1 purged", r, err)
	}
	if r, err := l.q.PurgeQueue(ctx, &pb.PurgeQueueRequest{Queue: "q", Dead: true}); err != nil || r.GetPurged() != 0 {
		t.Fatalf("dead purge: %v %v", r, err)
	}
	_, err = l.q.PauseQueue(ctx, &pb.PauseQueueRequest{Queue: "a/b"})
	wantErr(t, err, codes.InvalidArgument, "", "queue")

	// Before the cluster latched level 7: FEATURE_DISABLED.
	l.node.SetEnabledLevel(fsm.LevelCounters)
	_, err = l.q.PauseQueue(ctx, &pb.PauseQueueRequest{Queue: "q"})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonFeatureDisabled, "")
	_, err = l.q.PurgeQueue(ctx, &pb.PurgeQueueRequest{Queue: "q"})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonFeatureDisabled, "")
}

// Test_QueueControlNeedsAdmin: pause, resume and purge need admin over the
// queue's tenant: a reader or worker is PermissionDenied, another
// tenant's admin too, and the tenant's own admin may.
func Test_QueueControlNeedsAdmin(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	worker := mustToken(t, ts, []string{pb.RoleWorker, pb.RoleReader, pb.RoleProducer}, []string{"a"}, 0)
	adminB := mustToken(t, ts, []string{pb.RoleAdmin}, []string{"b"}, 0)
	adminA := mustToken(t, ts, []string{pb.RoleAdmin}, []string{"a"}, 0)
	for _, secret := range []string{worker.GetSecret(), adminB.GetSecret()} {
		_, err := ts.q.PauseQueue(as(ctx, secret), &pb.PauseQueueRequest{Queue: "q", Tenant: "a"})
		wantCode(t, "pause without admin over a", err, codes.PermissionDenied)
		_, err = ts.q.ResumeQueue(as(ctx, secret), &pb.ResumeQueueRequest{Queue: "q", Tenant: "a"})
		wantCode(t, "resume without admin over a", err, codes.PermissionDenied)
		_, err = ts.q.PurgeQueue(as(ctx, secret), &pb.PurgeQueueRequest{Queue: "q", Tenant: "a"})
		wantCode(t, "purge without admin over a", err, codes.PermissionDenied)
	}
	_, err := ts.q.PauseQueue(ctx, &pb.PauseQueueRequest{Queue: "q", Tenant: "a"})
	wantCode(t, "pause without a token", err, codes.Unauthenticated)
	if _, err := ts.q.PauseQueue(as(ctx, adminA.GetSecret()), &pb.PauseQueueRequest{Queue: "q", Tenant: "a"}); err != nil {
		t.Fatalf("pause by a's admin: %v", err)
	}
	if _, err := ts.q.PurgeQueue(as(ctx, adminA.GetSecret()), &pb.PurgeQueueRequest{Queue: "q", Tenant: "a"}); err != nil {
		t.Fatalf("purge by a's admin: %v", err)
	}
}
