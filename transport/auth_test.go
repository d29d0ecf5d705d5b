package transport

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// The token attacks, each over real gRPC on loopback against
// a server with auth on. authOn is a variable so that the suite can be
// run against a server without auth, where every attack succeeds (how
// these tests were seen to fail first).
var authOn = true

const adminSecret = "admin-secret-for-tests"

// authServer is a leader with auth on and a bootstrap admin token.
func authServer(t *testing.T) *testServer {
	t.Helper()
	ts := mustLeader(t, Config{Auth: authOn})
	if err := ts.node.Service().Bootstrap(testCtx(t), adminSecret); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	return ts
}

// as is ctx carrying secret as the caller's bearer token.
func as(ctx context.Context, secret string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, pb.MetadataAuthorization, "Bearer "+secret)
}

// mustToken creates a token through the API with the admin token.
func mustToken(t *testing.T, ts *testServer, roles, tenants []string, ttl time.Duration) *pb.CreateTokenResponse {
	t.Helper()
	resp, err := ts.c.CreateToken(as(testCtx(t), adminSecret), &pb.CreateTokenRequest{Name: "t", Roles: roles, Tenants: tenants, TtlNs: int64(ttl)})
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	return resp
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("%s: %v (%v), want %v", what, got, err, want)
	}
}

// taskOf reads a task with the admin token (every tenant).
func taskOf(t *testing.T, ts *testServer, id, tenant string) *pb.Task {
	t.Helper()
	resp, err := ts.q.GetTask(as(testCtx(t), adminSecret), &pb.GetTaskRequest{TaskId: id, Tenant: tenant})
	if err != nil {
		t.Fatalf("get %s as admin: %v", id, err)
	}
	return resp.GetTask()
}

// Attack 1: Stats{} with no token listed every queue and tenant.
func Test_AttackStatsWithoutToken(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	if _, err := ts.q.Enqueue(as(ctx, adminSecret), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a"}, {Queue: "q", Tenant: "b"}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := ts.q.Stats(ctx, &pb.StatsRequest{})
	wantCode(t, "stats without a token", err, codes.Unauthenticated)
	if len(resp.GetQueues()) != 0 {
		t.Fatalf("listed %v", resp.GetQueues())
	}
	_, err = ts.q.Stats(as(ctx, "not-a-token"), &pb.StatsRequest{})
	wantCode(t, "stats with an unknown token", err, codes.Unauthenticated)

	// A reader of tenant a sees a's queues only, with or without a filter.
	ra := mustToken(t, ts, []string{pb.RoleReader}, []string{"a"}, 0)
	all, err := ts.q.Stats(as(ctx, ra.GetSecret()), &pb.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range all.GetQueues() {
		if q.GetTenant() != "a" {
			t.Fatalf("reader of a sees tenant %q", q.GetTenant())
		}
	}
	if len(all.GetQueues()) != 1 {
		t.Fatalf("reader of a sees %d queues, want 1", len(all.GetQueues()))
	}
	_, err = ts.q.Stats(as(ctx, ra.GetSecret()), &pb.StatsRequest{Tenant: "b"})
	wantCode(t, "stats of tenant b with a's reader", err, codes.PermissionDenied)

	// Health stays open.
	if _, err := ts.c.Status(ctx, &pb.StatusRequest{}); err != nil {
		t.Fatalf("status without a token: %v", err)
	}
}

// Attack 2: GetTask of tenant A's task with tenant B's token read its
// payload. It is NotFound, exactly as an id that does not exist.
func Test_AttackGetTaskOtherTenant(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	pa := mustToken(t, ts, []string{pb.RoleProducer}, []string{"a"}, 0)
	pbt := mustToken(t, ts, []string{pb.RoleProducer, pb.RoleReader}, []string{"b"}, 0)
	enq, err := ts.q.Enqueue(as(ctx, pa.GetSecret()), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a", Payload: []byte("secret payload")}}})
	if err != nil {
		t.Fatal(err)
	}
	id := enq.GetItems()[0].GetTaskId()
	for _, stale := range []bool{false, true} {
		resp, err := ts.q.GetTask(as(ctx, pbt.GetSecret()), &pb.GetTaskRequest{TaskId: id, Tenant: "b", AllowStale: stale})
		wantCode(t, "get a's task as b", err, codes.NotFound)
		if resp.GetTask() != nil {
			t.Fatalf("payload returned: %v", resp.GetTask())
		}
		_, missing := ts.q.GetTask(as(ctx, pbt.GetSecret()), &pb.GetTaskRequest{TaskId: "999999-0", Tenant: "b", AllowStale: stale})
		if strings.ReplaceAll(status.Convert(err).Message(), id, "X") != strings.ReplaceAll(status.Convert(missing).Message(), "999999-0", "X") {
			t.Fatalf("another tenant's task answers %q, a missing one %q", status.Convert(err).Message(), status.Convert(missing).Message())
		}
	}
	// Naming tenant a with b's token is refused before any read.
	_, err = ts.q.GetTask(as(ctx, pbt.GetSecret()), &pb.GetTaskRequest{TaskId: id, Tenant: "a"})
	wantCode(t, "get naming a with b's token", err, codes.PermissionDenied)
	_, err = ts.q.WaitResult(as(ctx, pbt.GetSecret()), &pb.WaitResultRequest{TaskId: id, Tenant: "b", WaitNs: int64(time.Second)})
	wantCode(t, "wait on a's task as b", err, codes.NotFound)
	if got := taskOf(t, ts, id, "a"); got.GetState() != pb.TaskState_TASK_STATE_PENDING || string(got.GetPayload()) != "secret payload" {
		t.Fatalf("task changed: %v", got)
	}
}

// Attack 3: GetTask returned the fence, and another client submitted a
// forged result with it; the worker's own Submit was then alreadyDone.
func Test_AttackForgedSubmitWithFence(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	wa := mustToken(t, ts, []string{pb.RoleProducer, pb.RoleWorker, pb.RoleReader}, []string{"a"}, 0)
	wb := mustToken(t, ts, []string{pb.RoleProducer, pb.RoleWorker, pb.RoleReader}, []string{"b"}, 0)
	if _, err := ts.q.Enqueue(as(ctx, wa.GetSecret()), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a"}}}); err != nil {
		t.Fatal(err)
	}
	cl, err := ts.q.Claim(as(ctx, wa.GetSecret()), &pb.ClaimRequest{Queue: "q", Tenant: "a", WorkerId: "w"})
	if err != nil || len(cl.GetTasks()) != 1 || cl.GetTasks()[0].GetFence() == 0 {
		t.Fatalf("claim: %v %v", cl, err)
	}
	task := cl.GetTasks()[0]
	// No reader, not even of the task's own tenant, sees the fence.
	got, err := ts.q.GetTask(as(ctx, wa.GetSecret()), &pb.GetTaskRequest{TaskId: task.GetId(), Tenant: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetTask().GetFence() != 0 {
		t.Fatalf("GetTask shows fence %d", got.GetTask().GetFence())
	}
	// A forger of tenant b guesses the fence right: NotFound, nothing done.
	for _, tn := range []string{"b", ""} {
		_, err = ts.q.Submit(as(ctx, wb.GetSecret()), &pb.SubmitRequest{TaskId: task.GetId(), Fence: task.GetFence(), Tenant: tn,
			Outcome: pb.Outcome_OUTCOME_COMPLETED, Result: []byte("forged")})
		if tn == "" {
			wantCode(t, "forged submit naming no tenant (default)", err, codes.PermissionDenied)
		} else {
			wantCode(t, "forged submit as b", err, codes.NotFound)
		}
	}
	_, err = ts.q.Heartbeat(as(ctx, wb.GetSecret()), &pb.HeartbeatRequest{Items: []*pb.HeartbeatItem{{TaskId: task.GetId(), Fence: task.GetFence(), Tenant: "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ts.q.Nack(as(ctx, wb.GetSecret()), &pb.NackRequest{TaskId: task.GetId(), Fence: task.GetFence(), Tenant: "b"})
	wantCode(t, "forged nack as b", err, codes.NotFound)
	if st := taskOf(t, ts, task.GetId(), "a"); st.GetState() != pb.TaskState_TASK_STATE_RUNNING || len(st.GetResult()) != 0 {
		t.Fatalf("task changed by the forger: %v", st)
	}
	sub, err := ts.q.Submit(as(ctx, wa.GetSecret()), &pb.SubmitRequest{TaskId: task.GetId(), Fence: task.GetFence(), Tenant: "a",
		Outcome: pb.Outcome_OUTCOME_COMPLETED, Result: []byte("mine")})
	if err != nil || sub.GetAlreadyDone() {
		t.Fatalf("holder's submit: %v alreadyDone=%v", err, sub.GetAlreadyDone())
	}
	if st := taskOf(t, ts, task.GetId(), "a"); string(st.GetResult()) != "mine" {
		t.Fatalf("result %q", st.GetResult())
	}
	wr, err := ts.q.WaitResult(as(ctx, wa.GetSecret()), &pb.WaitResultRequest{TaskId: task.GetId(), Tenant: "a"})
	if err != nil || !wr.GetDone() || wr.GetTask().GetFence() != 0 {
		t.Fatalf("WaitResult: %v %v, fence %d", wr, err, wr.GetTask().GetFence())
	}
	// A dead letter's fence is not listed either.
	if _, err := ts.q.Enqueue(as(ctx, wa.GetSecret()), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "d", Tenant: "a", MaxAttempts: 1}}}); err != nil {
		t.Fatal(err)
	}
	cl, err = ts.q.Claim(as(ctx, wa.GetSecret()), &pb.ClaimRequest{Queue: "d", Tenant: "a", WorkerId: "w"})
	if err != nil || len(cl.GetTasks()) != 1 {
		t.Fatalf("claim: %v %v", cl, err)
	}
	d := cl.GetTasks()[0]
	if _, err := ts.q.Nack(as(ctx, wa.GetSecret()), &pb.NackRequest{TaskId: d.GetId(), Fence: d.GetFence(), Tenant: "a"}); err != nil {
		t.Fatal(err)
	}
	dead, err := ts.q.ListDead(as(ctx, adminSecret), &pb.ListDeadRequest{Queue: "d", Tenant: "a"})
	if err != nil || len(dead.GetTasks()) != 1 || dead.GetTasks()[0].GetFence() != 0 {
		t.Fatalf("ListDead: %v %v", dead, err)
	}
}

// Attack 4: Cancel of another tenant's task, TransferLeadership and
// RemoveServer all succeeded without admin.
func Test_AttackCancelAndClusterWithoutAdmin(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	aa := mustToken(t, ts, []string{pb.RoleAdmin, pb.RoleProducer}, []string{"a"}, 0)
	ab := mustToken(t, ts, []string{pb.RoleAdmin}, []string{"b"}, 0)
	enq, err := ts.q.Enqueue(as(ctx, aa.GetSecret()), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := enq.GetItems()[0].GetTaskId()
	_, err = ts.q.Cancel(as(ctx, ab.GetSecret()), &pb.CancelRequest{TaskId: id, Tenant: "b"})
	wantCode(t, "cancel of a's task by b's admin", err, codes.NotFound)
	_, err = ts.q.Cancel(ctx, &pb.CancelRequest{TaskId: id})
	wantCode(t, "cancel without a token", err, codes.Unauthenticated)
	if st := taskOf(t, ts, id, "a"); st.GetState() != pb.TaskState_TASK_STATE_PENDING {
		t.Fatalf("task %v after the attack", st.GetState())
	}

	worker := mustToken(t, ts, []string{pb.RoleProducer, pb.RoleWorker, pb.RoleReader}, []string{pb.AllTenants}, 0)
	for _, secret := range []string{worker.GetSecret(), aa.GetSecret()} {
		_, err = ts.c.TransferLeadership(as(ctx, secret), &pb.TransferLeadershipRequest{})
		wantCode(t, "transfer leadership without admin over *", err, codes.PermissionDenied)
		_, err = ts.c.RemoveServer(as(ctx, secret), &pb.RemoveServerRequest{Id: "node1"})
		wantCode(t, "remove server without admin over *", err, codes.PermissionDenied)
		_, err = ts.c.CreateToken(as(ctx, secret), &pb.CreateTokenRequest{Roles: []string{pb.RoleAdmin}, Tenants: []string{"*"}})
		wantCode(t, "create token without admin over *", err, codes.PermissionDenied)
	}
	_, err = ts.c.RemoveServer(ctx, &pb.RemoveServerRequest{Id: "node1"})
	wantCode(t, "remove server without a token", err, codes.Unauthenticated)
	if ts.node.Removed() != "" || !ts.node.IsLeader() {
		t.Fatalf("cluster changed: removed %q, leader %v", ts.node.Removed(), ts.node.IsLeader())
	}
	// The admin over every tenant can.
	if _, err := ts.c.RemoveServer(as(ctx, adminSecret), &pb.RemoveServerRequest{Id: "node1"}); err != nil {
		t.Fatalf("admin remove: %v", err)
	}
}

// Attack 5 (one node; the cluster-wide half is in cmd/docket): a token
// replayed after its revoke is Unauthenticated once the revoke applied.
func Test_AttackReplayAfterRevoke(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	p := mustToken(t, ts, []string{pb.RoleProducer}, []string{"a"}, 0)
	if _, err := ts.q.Enqueue(as(ctx, p.GetSecret()), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a"}}}); err != nil {
		t.Fatalf("enqueue before revoke: %v", err)
	}
	if _, err := ts.c.RevokeToken(as(ctx, adminSecret), &pb.RevokeTokenRequest{Accessor: p.GetAccessor()}); err != nil {
		t.Fatal(err)
	}
	_, err := ts.q.Enqueue(as(ctx, p.GetSecret()), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a"}}})
	wantCode(t, "replayed token", err, codes.Unauthenticated)
	st, err := ts.q.Stats(as(ctx, adminSecret), &pb.StatsRequest{Tenant: "a"})
	if err != nil || len(st.GetQueues()) != 1 || st.GetQueues()[0].GetPending() != 1 {
		t.Fatalf("stats after replay: %v %v", st, err)
	}
	list, err := ts.c.ListTokens(as(ctx, adminSecret), &pb.ListTokensRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range list.GetTokens() {
		if tk.GetAccessor() == p.GetAccessor() {
			t.Fatal("revoked token still listed")
		}
	}
	_, err = ts.c.RevokeToken(as(ctx, adminSecret), &pb.RevokeTokenRequest{Accessor: p.GetAccessor()})
	wantCode(t, "second revoke", err, codes.NotFound)
}

// Attack 6: an expired token.
func Test_AttackExpiredToken(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	p := mustToken(t, ts, []string{pb.RoleProducer, pb.RoleReader}, []string{"a"}, 300*time.Millisecond)
	if _, err := ts.q.Stats(as(ctx, p.GetSecret()), &pb.StatsRequest{Tenant: "a"}); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	deadline := time.Unix(0, p.GetExpiresAt())
	testwait.For(t, 10*time.Second, "the token to expire", func() bool { return time.Now().After(deadline) })
	_, err := ts.q.Enqueue(as(ctx, p.GetSecret()), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a"}}})
	wantCode(t, "expired token", err, codes.Unauthenticated)
	st, err := ts.q.Stats(as(ctx, adminSecret), &pb.StatsRequest{Tenant: "a"})
	if err != nil || len(st.GetQueues()) != 0 {
		t.Fatalf("state changed: %v %v", st, err)
	}
}

// Attack 7: tenant A's token on tenant B's Enqueue and Claim.
func Test_AttackTenantAOnB(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	a := mustToken(t, ts, []string{pb.RoleProducer, pb.RoleWorker}, []string{"a"}, 0)
	if _, err := ts.q.Enqueue(as(ctx, adminSecret), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "b"}}}); err != nil {
		t.Fatal(err)
	}
	_, err := ts.q.Enqueue(as(ctx, a.GetSecret()), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a"}, {Queue: "q", Tenant: "b"}}})
	wantCode(t, "enqueue into b with a's token", err, codes.PermissionDenied)
	cl, err := ts.q.Claim(as(ctx, a.GetSecret()), &pb.ClaimRequest{Queue: "q", Tenant: "b", WorkerId: "w"})
	wantCode(t, "claim from b with a's token", err, codes.PermissionDenied)
	if len(cl.GetTasks()) != 0 {
		t.Fatalf("claimed %v", cl.GetTasks())
	}
	st, err := ts.q.Stats(as(ctx, adminSecret), &pb.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.GetQueues()) != 1 || st.GetQueues()[0].GetTenant() != "b" || st.GetQueues()[0].GetPending() != 1 {
		t.Fatalf("state changed: %v", st.GetQueues())
	}
	// With its own tenant it works, and a worker cannot enqueue.
	if _, err := ts.q.Enqueue(as(ctx, a.GetSecret()), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a"}}}); err != nil {
		t.Fatalf("own tenant: %v", err)
	}
	w := mustToken(t, ts, []string{pb.RoleWorker}, []string{"a"}, 0)
	_, err = ts.q.Enqueue(as(ctx, w.GetSecret()), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a"}}})
	wantCode(t, "enqueue with a worker token", err, codes.PermissionDenied)
}

// Test_AuthForwardedHopChecksAgain: a follower forwards the caller's
// token, and the leader checks it against its own replica: a token the
// follower knows but the leader does not (here: never created there;
// in a cluster, revoked there first) is refused.
func Test_AuthForwardedHopChecksAgain(t *testing.T) {
	leader := authServer(t)
	follower := mustFollower(t, leader.addr, Config{Auth: authOn})
	ctx := testCtx(t)
	follower.node.SetLeader(true) // a MemNode applies only as a leader
	err := follower.node.Service().Bootstrap(ctx, "follower-only")
	follower.node.SetLeader(false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = follower.q.Enqueue(as(ctx, "follower-only"), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}})
	wantCode(t, "forwarded with a token the leader does not know", err, codes.Unauthenticated)
	// A token the follower does not hold yet (it lags): not refused there;
	// the follower asks the leader, whose answer is final, and the call
	// goes through (forwarded). Before, the follower answered
	// Unauthenticated and the client gave up (the secure harness saw
	// reads refused so on a rejoined node), and then NOT_LEADER, which
	// named no leader when the follower knew none.
	if _, err := follower.q.Enqueue(as(ctx, adminSecret), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}}); err != nil {
		t.Fatalf("a token the follower does not know yet: %v", err)
	}
	// One the leader does not know either: Unauthenticated at the follower.
	_, err = follower.q.Enqueue(as(ctx, "nobody-knows-this-one"), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}})
	wantCode(t, "a token nobody knows, at the follower", err, codes.Unauthenticated)
	if err := leader.node.Service().Bootstrap(ctx, "again"); err == nil {
		t.Fatal("second bootstrap accepted")
	}
	st, err := leader.q.Stats(as(ctx, adminSecret), &pb.StatsRequest{})
	if err != nil || len(st.GetQueues()) != 1 || st.GetQueues()[0].GetPending() != 1 {
		t.Fatalf("leader state: %v %v, want the one task enqueued through the follower", st, err)
	}
	// A token the leader does not know either is refused there, for good.
	_, err = leader.q.Enqueue(as(ctx, "nobody-knows-this-token"), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}})
	wantCode(t, "an unknown token on the leader", err, codes.Unauthenticated)
}

// Test_AuthFollowerSendsToTheLeaderItIsTold: a follower whose replica
// does not know a token asks the node it takes for the leader; when that
// node leads no longer (a stale view during an election), its answer names
// the new leader, and the follower sends the caller there, where the token
// works.
func Test_AuthFollowerSendsToTheLeaderItIsTold(t *testing.T) {
	leader := authServer(t)
	was := mustFollower(t, leader.addr, Config{Auth: authOn}) // led once; knows the new leader
	stale := mustFollower(t, was.addr, Config{Auth: authOn})  // still takes it for the leader
	ctx := testCtx(t)
	_, err := stale.q.GetTask(as(ctx, adminSecret), &pb.GetTaskRequest{TaskId: "x", AllowStale: true})
	wantCode(t, "a token asked of a node that leads no longer", err, codes.Unavailable)
	if info := errorInfoOf(err); info.GetReason() != pb.ReasonNotLeader || info.GetMetadata()[pb.ErrorInfoLeaderKey] != leader.addr {
		t.Fatalf("a token asked of a node that leads no longer: %v, want NOT_LEADER naming %s", err, leader.addr)
	}
	_, err = leader.q.GetTask(as(ctx, adminSecret), &pb.GetTaskRequest{TaskId: "x", AllowStale: true})
	wantCode(t, "the same call on the leader it was told", err, codes.NotFound)
}

// Test_AuthOffChangesNothing: without Auth, no token is needed and
// GetTask still shows the fence, as before.
func Test_AuthOffChangesNothing(t *testing.T) {
	ts := mustLeader(t, Config{})
	ids := mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})
	task := mustClaim(t, ts.q, "q", 1)[0]
	got, err := ts.q.GetTask(testCtx(t), &pb.GetTaskRequest{TaskId: ids[0]})
	if err != nil || got.GetTask().GetFence() != task.GetFence() {
		t.Fatalf("get: %v %v", got, err)
	}
	if _, err := ts.q.Stats(testCtx(t), &pb.StatsRequest{}); err != nil {
		t.Fatal(err)
	}
}

func errorInfoOf(err error) *errdetails.ErrorInfo {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}
