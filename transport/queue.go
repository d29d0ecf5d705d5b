package transport

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// queueService implements docket.v1.Queue. A write is admitted where it
// arrives (the Service builds, defaults and checks its command, so a
// follower refuses a bad request without a hop), then runs on the leader;
// reads are linearizable unless the caller allows a stale local read.
type queueService struct {
	pb.UnimplementedQueueServer
	s *Server
}

// admit is the Service's Admit of a write request where it arrived: the
// command, built, defaulted and checked once. A request that a node of
// the cluster forwarded was admitted there, so the leader does not check
// it again: the follower proved what it is with its server certificate
// (certs.IsPeer), and apply judges the command once more in any case.
// Without that proof (plaintext, or a client that set the forwarded
// header itself) the leader checks it as if it arrived there.
func (s *Server) admit(ctx context.Context, req proto.Message) (*pb.Command, error) {
	return s.svc.Admit(req, isForwarded(ctx) && fromPeer(ctx))
}

// fromPeer reports whether the call came over TLS from a node of the
// cluster (certs.IsPeer).
func fromPeer(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	return ok && certs.IsPeer(&info.State)
}

// propose runs cmd on this node, the leader, through the node's group
// commit. A whole-command rejection becomes its error.
func (s *Server) propose(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	var res *pb.CommandResult
	var err error
	if planted("ack-before-commit") { // a planted fault (planted_on.go)
		res, err = s.proposeEarly(ctx, cmd)
	} else {
		res, err = s.svc.Propose(ctx, cmd)
	}
	if err != nil {
		return nil, err
	}
	if err := pb.ResultError(res); err != nil {
		return nil, err
	}
	return res, nil
}

// write reads in one direction: admit req here, then find the leader
// (forwarding req there from a follower), then run the command on it;
// answer turns the FSM's result into the response.
func write[Resp proto.Message](s *Server, ctx context.Context, method string, req proto.Message, out Resp,
	answer func(*pb.CommandResult) (Resp, error)) (Resp, error) {
	cmd, err := s.admit(ctx, req)
	if err != nil {
		var zero Resp
		return zero, err
	}
	return run(s, ctx, method, req, out, cmd, answer)
}

// run is write's second half, for a handler that read its admitted
// command first: on the leader, propose cmd and answer.
func run[Resp proto.Message](s *Server, ctx context.Context, method string, req proto.Message, out Resp,
	cmd *pb.Command, answer func(*pb.CommandResult) (Resp, error)) (Resp, error) {
	return onLeader(s, ctx, method, req, out, func(ctx context.Context) (Resp, error) {
		res, err := s.propose(ctx, cmd)
		if err != nil {
			var zero Resp
			return zero, err
		}
		return answer(res)
	})
}

// read runs fn on the leader, forwarding req there from a follower, at
// linearizable consistency; or locally at once when stale is allowed.
func read[Resp proto.Message](s *Server, ctx context.Context, method string, req proto.Message, out Resp,
	stale bool, fn func(service.Consistency) (Resp, error)) (Resp, error) {
	if stale {
		return fn(service.Stale)
	}
	return onLeader(s, ctx, method, req, out, func(context.Context) (Resp, error) {
		return fn(service.Linearizable)
	})
}

// oneItem returns the single item of a one-task command's result.
func oneItem(res *pb.CommandResult) (*pb.ItemResult, error) {
	if n := len(res.GetItems()); n != 1 {
		return nil, fmt.Errorf("fsm answered %d items for a one-task command", n)
	}
	return res.GetItems()[0], nil
}

func (q *queueService) Enqueue(ctx context.Context, req *pb.EnqueueRequest) (*pb.EnqueueResponse, error) {
	return write(q.s, ctx, pb.Queue_Enqueue_FullMethodName, req, &pb.EnqueueResponse{},
		func(res *pb.CommandResult) (*pb.EnqueueResponse, error) {
			// A call the FSM refused whole for tenant limits fails
			// ResourceExhausted, so that a caller that reads only the
			// status sees it; a partial refusal is told per item.
			items := res.GetItems()
			for _, it := range items {
				if it.GetCode() != pb.Code_CODE_RESOURCE_EXHAUSTED {
					return &pb.EnqueueResponse{Items: items}, nil
				}
			}
			if len(items) > 0 {
				return nil, pb.ItemError(items[0])
			}
			return &pb.EnqueueResponse{Items: items}, nil
		})
}

// Heartbeat extends leases. On the leader, concurrent Heartbeats share
// Raft entries through the node's group commit; each caller gets the
// results of its own items, in its order.
func (q *queueService) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	return write(q.s, ctx, pb.Queue_Heartbeat_FullMethodName, req, &pb.HeartbeatResponse{},
		func(res *pb.CommandResult) (*pb.HeartbeatResponse, error) {
			if len(res.GetItems()) != len(req.GetItems()) {
				return nil, fmt.Errorf("fsm answered %d items for %d heartbeats", len(res.GetItems()), len(req.GetItems()))
			}
			return &pb.HeartbeatResponse{Items: res.GetItems()}, nil
		})
}

func (q *queueService) Submit(ctx context.Context, req *pb.SubmitRequest) (*pb.SubmitResponse, error) {
	return write(q.s, ctx, pb.Queue_Submit_FullMethodName, req, &pb.SubmitResponse{},
		func(res *pb.CommandResult) (*pb.SubmitResponse, error) {
			it, err := oneItem(res)
			if err != nil {
				return nil, err
			}
			if it.GetCode() == pb.Code_CODE_ALREADY_DONE {
				return &pb.SubmitResponse{AlreadyDone: true}, nil
			}
			if err := pb.ItemError(it); err != nil {
				return nil, err
			}
			return &pb.SubmitResponse{}, nil
		})
}

// SubmitBatch proposes one Batch entry of Submits: the items share a Raft
// entry and an RPC, and each keeps its own answer. With a claim the entry
// claims the caller's next tasks too (submitclaim.go).
func (q *queueService) SubmitBatch(ctx context.Context, req *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error) {
	if req.GetClaim() != nil {
		return q.submitThenClaim(ctx, req)
	}
	n := len(req.GetItems())
	return write(q.s, ctx, pb.Queue_SubmitBatch_FullMethodName, req, &pb.SubmitBatchResponse{},
		func(res *pb.CommandResult) (*pb.SubmitBatchResponse, error) {
			return submitBatchAnswer(res, n)
		})
}

// submitBatchAnswer is the answer to a Batch of n Submits: each one's item.
func submitBatchAnswer(res *pb.CommandResult, n int) (*pb.SubmitBatchResponse, error) {
	if len(res.GetResults()) != n {
		return nil, fmt.Errorf("fsm answered %d results for %d submits", len(res.GetResults()), n)
	}
	out := &pb.SubmitBatchResponse{Items: make([]*pb.ItemResult, n)}
	for i, r := range res.GetResults() {
		if err := pb.ResultError(r); err != nil {
			return nil, err // Check passed it: the FSM disagrees with the edge
		}
		it, err := oneItem(r)
		if err != nil {
			return nil, err
		}
		out.Items[i] = it
	}
	return out, nil
}

func (q *queueService) Nack(ctx context.Context, req *pb.NackRequest) (*pb.NackResponse, error) {
	return write(q.s, ctx, pb.Queue_Nack_FullMethodName, req, &pb.NackResponse{},
		func(res *pb.CommandResult) (*pb.NackResponse, error) {
			it, err := oneItem(res)
			if err != nil {
				return nil, err
			}
			if err := pb.ItemError(it); err != nil {
				return nil, err
			}
			return &pb.NackResponse{State: it.GetState()}, nil
		})
}

// Cancel of a task already cancelled is a success (the FSM answers
// ALREADY_DONE); of a finished task it is WRONG_STATE, and of a running
// one WRONG_STATE until feature level 9, then a cancel request
// (cancel_requested in the answer; a repeated one is a success too).
func (q *queueService) Cancel(ctx context.Context, req *pb.CancelRequest) (*pb.CancelResponse, error) {
	return write(q.s, ctx, pb.Queue_Cancel_FullMethodName, req, &pb.CancelResponse{},
		func(res *pb.CommandResult) (*pb.CancelResponse, error) {
			it, err := oneItem(res)
			if err != nil {
				return nil, err
			}
			if err := pb.ItemError(it); err != nil {
				return nil, err
			}
			return &pb.CancelResponse{CancelRequested: it.GetCancelRequested(), State: it.GetState()}, nil
		})
}

func (q *queueService) RequeueDead(ctx context.Context, req *pb.RequeueDeadRequest) (*pb.RequeueDeadResponse, error) {
	return write(q.s, ctx, pb.Queue_RequeueDead_FullMethodName, req, &pb.RequeueDeadResponse{},
		func(res *pb.CommandResult) (*pb.RequeueDeadResponse, error) {
			return &pb.RequeueDeadResponse{Items: res.GetItems()}, nil
		})
}

// GetTask is linearizable unless allow_stale: then any node answers from
// its replica, which may lag.
func (q *queueService) GetTask(ctx context.Context, req *pb.GetTaskRequest) (*pb.GetTaskResponse, error) {
	if req.GetTaskId() == "" {
		return nil, fieldError("task_id", "required")
	}
	return read(q.s, ctx, pb.Queue_GetTask_FullMethodName, req, &pb.GetTaskResponse{}, req.GetAllowStale(),
		func(c service.Consistency) (*pb.GetTaskResponse, error) {
			t, applied, err := q.s.svc.GetTask(ctx, req.GetTaskId(), c)
			if err == nil {
				err = service.OwnTask(t, req.GetTenant())
			}
			// The applied index also travels as header metadata, so that a
			// NotFound answer says which state it was read from too. A
			// forwarded read's header is lost; only stale reads need it.
			if err == nil || errors.Is(err, pb.ErrNotFound) {
				_ = grpc.SetHeader(ctx, metadata.Pairs(pb.MetadataAppliedIndex, strconv.FormatUint(applied, 10)))
			}
			if err != nil {
				return nil, err
			}
			return &pb.GetTaskResponse{Task: hideFence(ctx, t), AppliedIndex: applied}, nil
		})
}

// Stats is linearizable: the request has no way to allow a stale answer,
// and an operator comparing counts before and after an action must not
// see them go back in time by asking another node.
func (q *queueService) Stats(ctx context.Context, req *pb.StatsRequest) (*pb.StatsResponse, error) {
	return read(q.s, ctx, pb.Queue_Stats_FullMethodName, req, &pb.StatsResponse{}, false,
		func(c service.Consistency) (*pb.StatsResponse, error) {
			st, next, err := q.s.svc.Stats(ctx, req.GetQueue(), req.GetTenant(), req.GetCursor(), c)
			if err != nil {
				return nil, err
			}
			return &pb.StatsResponse{Queues: filterStats(ctx, st), NextCursor: next}, nil
		})
}

// ListDead pages through a queue's dead letters, oldest id first. It is
// linearizable, like Stats.
func (q *queueService) ListDead(ctx context.Context, req *pb.ListDeadRequest) (*pb.ListDeadResponse, error) {
	if err := service.CheckListDead(req); err != nil {
		return nil, err
	}
	return read(q.s, ctx, pb.Queue_ListDead_FullMethodName, req, &pb.ListDeadResponse{}, false,
		func(c service.Consistency) (*pb.ListDeadResponse, error) {
			tasks, next, err := q.s.svc.ListDead(ctx, req, c)
			if err != nil {
				return nil, err
			}
			for i, t := range tasks {
				tasks[i] = hideFence(ctx, t)
			}
			return &pb.ListDeadResponse{Tasks: tasks, NextCursor: next}, nil
		})
}

// ListTasks pages through a queue's tasks in one state. It is
// linearizable, like Stats. The current claim's fence is dropped for
// every caller, token or not: the listing is for watching, and a fence
// lets its holder submit (service.ListedTaskFor). The answer names the
// running tasks this leader saw orphaned (service.Service.Orphaned).
func (q *queueService) ListTasks(ctx context.Context, req *pb.ListTasksRequest) (*pb.ListTasksResponse, error) {
	if err := service.CheckListTasks(req); err != nil {
		return nil, err
	}
	return read(q.s, ctx, pb.Queue_ListTasks_FullMethodName, req, &pb.ListTasksResponse{}, false,
		func(c service.Consistency) (*pb.ListTasksResponse, error) {
			tasks, next, err := q.s.svc.ListTasks(ctx, req, c)
			if err != nil {
				return nil, err
			}
			// Orphans are asked of this node, the leader, before the
			// fences go: they are known by (id, fence).
			orphans := q.s.svc.Orphaned(tasks)
			tok := tokenOf(ctx)
			for i, t := range tasks {
				tasks[i] = service.ListedTaskFor(tok, t)
			}
			return &pb.ListTasksResponse{Tasks: tasks, NextCursor: next, OrphanedTaskIds: orphans}, nil
		})
}
