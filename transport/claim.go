package transport

import (
	"context"
	"time"

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
	resp, err := onLeader(s, ctx, pb.Queue_Claim_FullMethodName, req, &pb.ClaimResponse{},
		func(ctx context.Context) (*pb.ClaimResponse, error) {
			tasks, err := s.svc.Claim(ctx, cmd, wait)
			if err != nil {
				return nil, err
			}
			return &pb.ClaimResponse{Tasks: tasks}, nil
		})
	if err == nil {
		// Claimed here or by the leader for this node: for claimWatch,
		// if the send fails.
		watchClaim(ctx, resp.GetTasks())
	}
	return resp, err
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
