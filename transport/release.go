package transport

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Undelivered claims. A Claim (or ClaimBatch) whose answer gRPC could not
// send leaves its tasks RUNNING under a lease nobody holds. The node that
// failed to send hands them back: the leader proposes the Release itself
// (service.Service.ReleaseTasks); a follower, which relayed the leader's
// answer, asks the leader to (Cluster.ReleaseClaims) with the caller's
// authorization.

// claimWatch is a gRPC stats handler that sees the end of each Claim,
// ClaimBatch and SubmitBatch (which may claim): when the handler answered
// tasks but gRPC could not send the answer (the caller reset the stream,
// the connection broke), they are undelivered and the node releases them,
// every item's of a ClaimBatch.
// An answer lost after it was written to the connection is not seen; its
// leases expire and the reaper counts an attempt, as before.
type claimWatch struct{ s *Server }

type claimSlotKey struct{}

// claimSlot carries a Claim's tasks (all items' of a ClaimBatch) and the
// caller's authorization from the handler to claimWatch.
type claimSlot struct {
	tasks atomic.Pointer[[]*pb.Task]
	auth  []string
}

// watchClaim hands the tasks a Claim handler answers to claimWatch.
func watchClaim(ctx context.Context, tasks []*pb.Task) {
	slot, ok := ctx.Value(claimSlotKey{}).(*claimSlot)
	if !ok || len(tasks) == 0 {
		return
	}
	slot.auth = metadata.ValueFromIncomingContext(ctx, pb.MetadataAuthorization)
	slot.tasks.Store(&tasks)
}

func (w claimWatch) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	switch info.FullMethodName {
	case pb.Queue_Claim_FullMethodName, pb.Queue_ClaimBatch_FullMethodName, pb.Queue_SubmitBatch_FullMethodName:
	default:
		return ctx
	}
	return context.WithValue(ctx, claimSlotKey{}, &claimSlot{})
}

func (w claimWatch) HandleRPC(ctx context.Context, st stats.RPCStats) {
	end, ok := st.(*stats.End)
	if !ok || end.Error == nil {
		return
	}
	if slot, ok := ctx.Value(claimSlotKey{}).(*claimSlot); ok {
		if tasks := slot.tasks.Swap(nil); tasks != nil {
			w.s.releaseUndelivered(slot.auth, *tasks)
		}
	}
}

func (claimWatch) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (claimWatch) HandleConn(context.Context, stats.ConnStats)                       {}

// releaseUndelivered puts back tasks whose claim's answer this node could
// not send. On the leader the Service proposes the Release. A follower
// only relayed the leader's answer: it sends the tasks to the leader, in
// the background, with the caller's authorization (auth), so the leader
// holds the release to the caller's tenants as it held the claim.
func (s *Server) releaseUndelivered(auth []string, tasks []*pb.Task) {
	if s.svc.IsLeader() {
		s.svc.ReleaseTasks(tasks)
		return
	}
	items := make([]*pb.ReleaseClaimsItem, len(tasks))
	for i, t := range tasks {
		items[i] = &pb.ReleaseClaimsItem{TaskId: t.GetId(), Fence: t.GetFence(), Tenant: t.GetTenant()}
	}
	started := s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.ctx, releaseForwardTimeout)
		defer cancel()
		// onLeader forwards the incoming authorization (forwardAuth).
		ctx = metadata.NewIncomingContext(ctx, metadata.MD{pb.MetadataAuthorization: auth})
		_, err := onLeader(s, ctx, pb.Cluster_ReleaseClaims_FullMethodName, &pb.ReleaseClaimsRequest{Items: items},
			&pb.ReleaseClaimsResponse{}, func(context.Context) (*pb.ReleaseClaimsResponse, error) {
				// Leader since the send failed: release here.
				s.svc.ReleaseTasks(tasks)
				return &pb.ReleaseClaimsResponse{Accepted: uint32(len(tasks))}, nil
			})
		if err != nil {
			s.log.Warn("handing undelivered claimed tasks back to the leader failed; their leases will expire",
				"tasks", len(items), "err", err)
			return
		}
		s.log.Info("handed undelivered claimed tasks back to the leader", "tasks", len(items))
	})
	if !started {
		s.log.Warn("not releasing undelivered claimed tasks while stopping; their leases will expire", "tasks", len(items))
	}
}

// releaseForwardTimeout bounds a follower's ReleaseClaims call. Past it
// the leases expire instead, which is where the tasks went before.
const releaseForwardTimeout = 10 * time.Second

// ReleaseClaims puts back tasks a follower claimed for a caller it could
// not answer. It runs on the leader. With auth on, a task of a tenant
// other than its item's is skipped without a word (the caller's token was
// checked for the items' tenants), as another tenant's task is NotFound
// elsewhere; the FSM releases a task only under the fence given.
func (c *clusterService) ReleaseClaims(ctx context.Context, req *pb.ReleaseClaimsRequest) (*pb.ReleaseClaimsResponse, error) {
	if n := len(req.GetItems()); n == 0 || n > maxClaimBatchTasks {
		return nil, fieldError("items", "1 to 1000 items")
	}
	s := c.s
	return onLeader(s, ctx, pb.Cluster_ReleaseClaims_FullMethodName, req, &pb.ReleaseClaimsResponse{},
		func(ctx context.Context) (*pb.ReleaseClaimsResponse, error) {
			var tasks []*pb.Task
			for _, it := range req.GetItems() {
				if tn := it.GetTenant(); tn != "" {
					t, _, err := s.svc.GetTask(ctx, it.GetTaskId(), service.Stale)
					if err != nil || service.OwnTask(t, tn) != nil {
						continue
					}
				}
				tasks = append(tasks, &pb.Task{Id: it.GetTaskId(), Fence: it.GetFence()})
			}
			s.svc.ReleaseTasks(tasks)
			return &pb.ReleaseClaimsResponse{Accepted: uint32(len(tasks))}, nil
		})
}

// lagCancel is ctx for a forwarded Claim: it keeps ctx's values and
// deadline, but a cancel reaches it only claimCancelGrace after it
// reached ctx. A caller that leaves while the leader's answer is on its
// way would otherwise cancel the forwarded call with the tasks claimed
// and unseen by this node, which could then not release them; with the
// grace the answer arrives, gRPC fails to send it, and claimWatch
// releases its tasks. A long poll still ends soon after its caller left.
func lagCancel(ctx context.Context) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if dl, ok := ctx.Deadline(); ok {
		var cancelDL context.CancelFunc
		out, cancelDL = context.WithDeadline(out, dl)
		inner := cancel
		cancel = func() { cancelDL(); inner() }
	}
	var mu sync.Mutex
	var timer *time.Timer
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(claimCancelGrace, cancel)
	})
	return out, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// claims reports whether a call of method with req may claim tasks: a
// Claim, a ClaimBatch, or a SubmitBatch with a claim.
func claims(method string, req any) bool {
	switch method {
	case pb.Queue_Claim_FullMethodName, pb.Queue_ClaimBatch_FullMethodName:
		return true
	case pb.Queue_SubmitBatch_FullMethodName:
		r, ok := req.(*pb.SubmitBatchRequest)
		return ok && r.GetClaim() != nil
	}
	return false
}

// claimCancelGrace is how long a forwarded Claim outlives its caller's
// cancel: long enough for an answer already sent on a LAN to arrive.
const claimCancelGrace = time.Second

// spawn runs fn in a goroutine that Stop waits for, unless the server is
// stopping; it reports whether fn runs.
func (s *Server) spawn(fn func()) bool {
	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return true
}
