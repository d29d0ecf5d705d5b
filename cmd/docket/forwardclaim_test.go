package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/transport"
)

// answerGate holds a follower's answer to a Claim its caller sent it
// directly (not a call another node forwarded) until the caller is gone:
// the window between the leader's commit and the follower's answer, made
// wide enough for a test to cancel in.
// Only the one call after arm is held.
type answerGate struct {
	armed    *atomic.Bool
	answered chan struct{}
}

func (g answerGate) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if (info.FullMethod != pb.Queue_Claim_FullMethodName && info.FullMethod != pb.Queue_ClaimBatch_FullMethodName &&
		info.FullMethod != pb.Queue_SubmitBatch_FullMethodName) ||
		len(md.Get(pb.MetadataForwarded)) > 0 || !g.armed.CompareAndSwap(true, false) {
		return handler(ctx, req)
	}
	resp, err := handler(ctx, req)
	select {
	case g.answered <- struct{}{}:
	default:
	}
	<-ctx.Done() // the caller left: gRPC cannot send resp now
	return resp, err
}

// Test_ForwardedClaimUndeliveredIsReleased: a Claim sent to a follower,
// forwarded and committed by the leader, whose caller disconnects before
// the follower answers, puts its tasks back at once (no attempt counted),
// as an undelivered direct Claim does, instead of leaving them RUNNING
// until their lease ends. ClaimBatch alike, and a SubmitBatch that claims.
func Test_ForwardedClaimUndeliveredIsReleased(t *testing.T) {
	t.Run("auth off", func(t *testing.T) { forwardedClaimUndelivered(t, false) })
	// With tokens, the follower hands the tasks back under the worker's
	// token, held to its tenant.
	t.Run("auth on", func(t *testing.T) { forwardedClaimUndelivered(t, true) })
}

func forwardedClaimUndelivered(t *testing.T, auth bool) {
	const boot = "bootstrap-secret-for-the-test"
	gate := answerGate{armed: new(atomic.Bool), answered: make(chan struct{}, 1)}
	nodes := startClusterAPI(t, 3, func(c *cluster.Config) { c.BootstrapSecret = boot }, transport.Config{Auth: auth,
		ServerOptions: []grpc.ServerOption{grpc.ChainUnaryInterceptor(gate.intercept)}})
	leader := waitLeader(t, nodes)
	follower := followers(nodes, leader)[0]
	tenant, secret := "", ""
	if auth {
		tenant = "acme"
		admin := mustClientWith(t, addrsOf(nodes), client.WithToken(boot))
		testwait.For(t, 10*time.Second, "a worker token", func() bool {
			tok, err := admin.CreateToken(ctxT(t, 10*time.Second), &pb.CreateTokenRequest{Name: "w",
				Roles: []string{pb.RoleProducer, pb.RoleWorker}, Tenants: []string{tenant}})
			secret = tok.GetSecret()
			return err == nil
		})
	}
	c := mustClientWith(t, []string{leader.grpcAddr}, client.WithToken(secret))
	fq := rawQueue(t, follower.grpcAddr)
	const lease = time.Minute

	for _, call := range []string{"Claim", "ClaimBatch", "SubmitBatch"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var done *pb.Task // SubmitBatch's task to submit
		if call == "SubmitBatch" {
			if _, err := c.Enqueue(ctx, &pb.NewTask{Queue: "fwd", Tenant: tenant}); err != nil {
				t.Fatal(err)
			}
			got, err := c.Claim(ctx, &pb.ClaimRequest{Queue: "fwd", Tenant: tenant, WorkerId: "w", MaxTasks: 1})
			if err != nil || len(got) != 1 {
				t.Fatalf("claim the task to submit: %v, %v", got, err)
			}
			done = got[0]
		}
		items, err := c.Enqueue(ctx, &pb.NewTask{Queue: "fwd", Tenant: tenant, Payload: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		id := items[0].GetTaskId()
		claimCtx, leave := context.WithCancel(metadata.AppendToOutgoingContext(ctx, pb.MetadataAuthorization, "Bearer "+secret))
		errc := make(chan error, 1)
		gate.armed.Store(true)
		go func() {
			req := &pb.ClaimRequest{Queue: "fwd", Tenant: tenant, WorkerId: "gone", MaxTasks: 1, LeaseNs: int64(lease)}
			var err error
			switch call {
			case "ClaimBatch":
				_, err = fq.ClaimBatch(claimCtx, &pb.ClaimBatchRequest{Items: []*pb.ClaimRequest{req}})
			case "SubmitBatch":
				_, err = fq.SubmitBatch(claimCtx, &pb.SubmitBatchRequest{Claim: req, Items: []*pb.SubmitRequest{{
					TaskId: done.GetId(), Fence: done.GetFence(), Tenant: tenant, Outcome: pb.Outcome_OUTCOME_COMPLETED}}})
			default:
				_, err = fq.Claim(claimCtx, req)
			}
			errc <- err
		}()
		select {
		case <-gate.answered:
		case err := <-errc:
			t.Fatalf("%s: claim through the follower ended before its answer was held: %v", call, err)
		}
		task, err := leader.node.FSM().GetTask(id)
		if err != nil || task.GetState() != pb.TaskState_TASK_STATE_RUNNING {
			t.Fatalf("%s: on the leader after the commit: %v, %v; want RUNNING", call, task, err)
		}
		leave() // between the leader's commit and the follower's answer
		if err := <-errc; status.Code(err) != codes.Canceled {
			t.Fatalf("%s: claim whose caller left: %v", call, err)
		}
		start := time.Now()
		testwait.For(t, 10*time.Second, "the undelivered forwarded claim to be released", func() bool {
			task, err := leader.node.FSM().GetTask(id)
			return err == nil && task.GetState() == pb.TaskState_TASK_STATE_PENDING
		})
		t.Logf("%s: released %v after the caller left (lease %v)", call, time.Since(start).Round(time.Millisecond), lease)
		if done != nil {
			if got, err := leader.node.FSM().GetTask(done.GetId()); err != nil || got.GetState() != pb.TaskState_TASK_STATE_COMPLETED {
				t.Fatalf("%s: the submitted task is %v, %v; want COMPLETED", call, got.GetState(), err)
			}
		}
		task, _ = leader.node.FSM().GetTask(id)
		if task.GetAttempts() != 0 {
			t.Fatalf("%s: released task has %d attempts, want 0", call, task.GetAttempts())
		}
		got, err := c.Claim(ctx, &pb.ClaimRequest{Queue: "fwd", Tenant: tenant, WorkerId: "next", MaxTasks: 1})
		if err != nil || len(got) != 1 || got[0].GetId() != id {
			t.Fatalf("%s: next claim: %v, %v; want the released %s", call, got, err, id)
		}
		cancel()
	}
}
