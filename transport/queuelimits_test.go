package transport

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

func u32p(v uint32) *uint32 { return &v }
func u64p(v uint64) *uint64 { return &v }

// Test_QueueLimitsOverGRPC: SetQueueLimits from a follower that forwards
// it, the limit at claim, Stats showing it, a bad value naming its field,
// and FEATURE_DISABLED before the latch.
func Test_QueueLimitsOverGRPC(t *testing.T) {
	l := mustLeader(t, Config{})
	f := mustFollower(t, l.addr, Config{})
	ctx := testCtx(t)
	mustEnqueue(t, l.q, &pb.NewTask{Queue: "q"}, &pb.NewTask{Queue: "q"}, &pb.NewTask{Queue: "q"})
	req := &pb.SetQueueLimitsRequest{Queue: "q", MaxRunning: u32p(2), RateMilli: u64p(5000), Burst: u32p(10)}
	if r, err := f.q.SetQueueLimits(ctx, req); err != nil || !r.GetChanged() {
		t.Fatalf("set limits: %v %v", r, err)
	}
	if r, err := l.q.SetQueueLimits(ctx, req); err != nil || r.GetChanged() {
		t.Fatalf("the same limits again: %v %v, want unchanged", r, err)
	}
	resp, err := l.q.Claim(ctx, &pb.ClaimRequest{Queue: "q", WorkerId: "w", MaxTasks: 3})
	if err != nil || len(resp.GetTasks()) != 2 {
		t.Fatalf("claim under a limit of 2: %d tasks, %v", len(resp.GetTasks()), err)
	}
	st, err := f.q.Stats(ctx, &pb.StatsRequest{Queue: "q"})
	if err != nil || len(st.GetQueues()) != 1 {
		t.Fatalf("stats: %v %v", st, err)
	}
	if s := st.GetQueues()[0]; s.GetMaxRunning() != 2 || s.GetRateMilli() != 5000 || s.GetBurst() != 10 || s.GetTokensMilli() != 8000 {
		t.Fatalf("stats show %v", s)
	}
	_, err = l.q.SetQueueLimits(ctx, &pb.SetQueueLimitsRequest{Queue: "q", RateMilli: u64p(fsm.MaxRateMilli + 1)})
	wantErr(t, err, codes.InvalidArgument, "", "rate_milli")

	l.node.SetEnabledLevel(fsm.LevelQueueControl)
	_, err = l.q.SetQueueLimits(ctx, req)
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonFeatureDisabled, "")
}

// Test_QueueLimitsNeedAdmin: a queue's limits need admin over its tenant;
// a tenant's own limit needs admin over every tenant, so a tenant's admin
// cannot lift the limit the operator set.
func Test_QueueLimitsNeedAdmin(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	worker := mustToken(t, ts, []string{pb.RoleWorker, pb.RoleReader, pb.RoleProducer}, []string{"a"}, 0)
	adminB := mustToken(t, ts, []string{pb.RoleAdmin}, []string{"b"}, 0)
	adminA := mustToken(t, ts, []string{pb.RoleAdmin}, []string{"a"}, 0)
	root := mustToken(t, ts, []string{pb.RoleAdmin}, []string{pb.AllTenants}, 0)
	queue := &pb.SetQueueLimitsRequest{Queue: "q", Tenant: "a", MaxRunning: u32p(1)}
	tenant := &pb.SetQueueLimitsRequest{Tenant: "a", MaxRunning: u32p(1)}
	for _, secret := range []string{worker.GetSecret(), adminB.GetSecret()} {
		_, err := ts.q.SetQueueLimits(as(ctx, secret), queue)
		wantCode(t, "queue limits without admin over a", err, codes.PermissionDenied)
	}
	if _, err := ts.q.SetQueueLimits(as(ctx, adminA.GetSecret()), queue); err != nil {
		t.Fatalf("queue limits by a's admin: %v", err)
	}
	_, err := ts.q.SetQueueLimits(as(ctx, adminA.GetSecret()), tenant)
	wantCode(t, "a tenant's limit by its own admin", err, codes.PermissionDenied)
	if _, err := ts.q.SetQueueLimits(as(ctx, root.GetSecret()), tenant); err != nil {
		t.Fatalf("a tenant's limit by an admin of every tenant: %v", err)
	}
}
