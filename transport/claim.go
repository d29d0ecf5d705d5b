package transport

import (
	"context"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/stats"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Claim takes up to max_tasks (default 1) tasks under a lease (default
// the node's default lease), waiting up to min(wait_ns, MaxClaimWait) for
// one, and answering empty before the caller's deadline rather than miss
// it. It runs on the leader: a follower forwards the whole long poll. The
// waiting is the node's (service.Service.Claim); this handler bounds the
// long polls per connection and sees the answer delivered.
func (q *queueService) Claim(ctx context.Context, req *pb.ClaimRequest) (*pb.ClaimResponse, error) {
	s := q.s
	cmd, err := s.admit(ctx, req)
	if err != nil {
		return nil, err
	}
	wait := min(time.Duration(max(req.GetWaitNs(), 0)), s.cfg.MaxClaimWait)
	if wait > 0 {
		release, err := s.polls.acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return onLeader(s, ctx, pb.Queue_Claim_FullMethodName, req, &pb.ClaimResponse{},
		func(ctx context.Context) (*pb.ClaimResponse, error) {
			tasks, err := s.svc.Claim(ctx, cmd, wait)
			if err != nil {
				return nil, err
			}
			if slot, ok := ctx.Value(claimSlotKey{}).(*claimSlot); ok && len(tasks) > 0 {
				slot.tasks.Store(&tasks) // for claimWatch, if the send fails
			}
			return &pb.ClaimResponse{Tasks: tasks}, nil
		})
}

// WaitResult waits up to min(wait_ns, MaxResultWait) for a task to end:
// completed, failed, cancelled or dead. It runs on the leader, which reads
// after a barrier and waits on its replica (service.Service.WaitResult).
// done is false when the wait ran out (or the server began to stop) first.
func (q *queueService) WaitResult(ctx context.Context, req *pb.WaitResultRequest) (*pb.WaitResultResponse, error) {
	s := q.s
	if req.GetTaskId() == "" {
		return nil, fieldError("task_id", "required")
	}
	if req.GetWaitNs() < 0 {
		return nil, fieldError("wait_ns", "negative")
	}
	wait := min(time.Duration(req.GetWaitNs()), s.cfg.MaxResultWait)
	if wait > 0 {
		release, err := s.polls.acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return onLeader(s, ctx, pb.Queue_WaitResult_FullMethodName, req, &pb.WaitResultResponse{},
		func(ctx context.Context) (*pb.WaitResultResponse, error) {
			// Another tenant's task is NotFound before any wait: waiting
			// first would tell by its time that the id exists.
			if tn := req.GetTenant(); tn != "" {
				t, _, err := s.svc.GetTask(ctx, req.GetTaskId(), service.Linearizable)
				if err == nil {
					err = service.OwnTask(t, tn)
				}
				if err != nil {
					return nil, err
				}
			}
			t, done, err := s.svc.WaitResult(ctx, req.GetTaskId(), wait)
			if err != nil {
				return nil, err
			}
			return &pb.WaitResultResponse{Task: hideFence(ctx, t), Done: done}, nil
		})
}

// claimWatch is a gRPC stats handler that sees the end of each Claim and
// ClaimBatch: when the handler answered tasks but gRPC could not send the
// answer (the caller reset the stream, the connection broke), they are
// undelivered and the node releases them, every item's of a ClaimBatch.
// An answer lost after it was written to the connection is not seen; its
// leases expire and the reaper counts an attempt, as before.
type claimWatch struct{ s *Server }

type claimSlotKey struct{}

// claimSlot carries a Claim's tasks (all items' of a ClaimBatch) from the
// handler to claimWatch.
type claimSlot struct {
	tasks atomic.Pointer[[]*pb.Task]
}

func (w claimWatch) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if info.FullMethodName != pb.Queue_Claim_FullMethodName && info.FullMethodName != pb.Queue_ClaimBatch_FullMethodName {
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
			w.s.svc.ReleaseTasks(*tasks)
		}
	}
}

func (claimWatch) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (claimWatch) HandleConn(context.Context, stats.ConnStats)                       {}
