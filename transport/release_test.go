package transport

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_LagCancel: a forwarded Claim's context outlives its caller's cancel
// by claimCancelGrace, so an answer already on its way still arrives, and
// then ends; a deadline holds as it is.
func Test_LagCancel(t *testing.T) {
	caller, leave := context.WithCancel(context.Background())
	out, stop := lagCancel(caller)
	defer stop()
	leave()
	left := time.Now()
	if out.Err() != nil {
		t.Fatal("the forwarded call ended with its caller, with no grace")
	}
	testwait.For(t, 5*claimCancelGrace, "the grace to end", func() bool { return out.Err() != nil })
	if waited := time.Since(left); waited < claimCancelGrace-claimCancelGrace/10 {
		t.Fatalf("the forwarded call ended %v after its caller, before the grace of %v", waited, claimCancelGrace)
	}

	dl := time.Now().Add(time.Hour)
	caller, leave = context.WithDeadline(context.Background(), dl)
	defer leave()
	out, stop = lagCancel(caller)
	stop() // the call returned: the context ends at once
	if got, ok := out.Deadline(); !ok || !got.Equal(dl) {
		t.Fatalf("deadline %v %v, want the caller's %v", got, ok, dl)
	}
	if out.Err() == nil {
		t.Fatal("stop did not end the forwarded call's context")
	}
}

// Test_ReleaseClaimsHeldToTheTenant: ReleaseClaims puts back only tasks
// of the tenants the caller's token grants, under the fence given: a
// worker of one tenant cannot hand back another tenant's running task,
// whatever tenant its items name.
func Test_ReleaseClaimsHeldToTheTenant(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	a := mustToken(t, ts, []string{pb.RoleProducer, pb.RoleWorker}, []string{"a"}, 0)
	b := mustToken(t, ts, []string{pb.RoleWorker}, []string{"b"}, 0)
	if _, err := ts.q.Enqueue(as(ctx, a.GetSecret()), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "a"}}}); err != nil {
		t.Fatal(err)
	}
	cl, err := ts.q.Claim(as(ctx, a.GetSecret()), &pb.ClaimRequest{Queue: "q", Tenant: "a", WorkerId: "w", MaxTasks: 1})
	if err != nil || len(cl.GetTasks()) != 1 {
		t.Fatalf("claim: %v %v", cl, err)
	}
	task := cl.GetTasks()[0]
	item := func(tenant string) *pb.ReleaseClaimsRequest {
		return &pb.ReleaseClaimsRequest{Items: []*pb.ReleaseClaimsItem{{TaskId: task.GetId(), Fence: task.GetFence(), Tenant: tenant}}}
	}
	_, err = ts.c.ReleaseClaims(as(ctx, b.GetSecret()), item("a"))
	wantCode(t, "b's token releasing a's task by name", err, codes.PermissionDenied)
	resp, err := ts.c.ReleaseClaims(as(ctx, b.GetSecret()), item("b"))
	if err != nil || resp.GetAccepted() != 0 {
		t.Fatalf("b's token releasing a's task under b: %v %v, want nothing accepted", resp, err)
	}
	if got, _ := ts.node.FSM().GetTask(task.GetId()); got.GetState() != pb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("a's task is %v after b's releases, want RUNNING", got.GetState())
	}
	if resp, err := ts.c.ReleaseClaims(as(ctx, a.GetSecret()), item("a")); err != nil || resp.GetAccepted() != 1 {
		t.Fatalf("a's token releasing a's task: %v %v", resp, err)
	}
	testwait.For(t, 5*time.Second, "a's task back to pending", func() bool {
		got, err := ts.node.FSM().GetTask(task.GetId())
		return err == nil && got.GetState() == pb.TaskState_TASK_STATE_PENDING
	})
}
