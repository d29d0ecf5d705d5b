package transport

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// queueService implements docket.v1.Queue. Writes build a Command,
// validate it here (so a follower refuses a bad request without a hop),
// and run on the leader; reads are linearizable unless the caller allows a
// stale local read.
type queueService struct {
	pb.UnimplementedQueueServer
	s *Server
}

// propose runs cmd on this node, the leader. A whole-command rejection
// becomes its error.
func (s *Server) propose(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	res, err := s.node.Propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if err := fsm.ResultError(res); err != nil {
		return nil, err
	}
	return res, nil
}

// write validates cmd and proposes it on the leader (forwarding req there
// from a follower); answer turns the FSM's result into the response.
func write[Resp proto.Message](s *Server, ctx context.Context, method string, req proto.Message, out Resp,
	cmd *pb.Command, answer func(*pb.CommandResult) (Resp, error)) (Resp, error) {
	if err := fsm.Validate(cmd, s.node.Limits()); err != nil {
		var zero Resp
		return zero, err
	}
	return onLeader(s, ctx, method, req, out, func(ctx context.Context) (Resp, error) {
		res, err := s.proposeClient(ctx, cmd)
		if err != nil {
			var zero Resp
			return zero, err
		}
		return answer(res)
	})
}

// read runs fn after a read barrier on the leader (forwarding req there
// from a follower), or locally at once when stale is allowed.
func read[Resp proto.Message](s *Server, ctx context.Context, method string, req proto.Message, out Resp,
	stale bool, fn func() (Resp, error)) (Resp, error) {
	if stale {
		return fn()
	}
	return onLeader(s, ctx, method, req, out, func(ctx context.Context) (Resp, error) {
		if err := s.node.ReadBarrier(ctx); err != nil {
			var zero Resp
			return zero, err
		}
		return fn()
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
	for _, t := range req.GetTasks() {
		if t != nil && t.Tenant == "" {
			t.Tenant = DefaultTenant
		}
	}
	cmd := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE,
		Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: req.GetTasks()}}}
	return write(q.s, ctx, pb.Queue_Enqueue_FullMethodName, req, &pb.EnqueueResponse{}, cmd,
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
				return nil, fsm.ItemError(items[0])
			}
			return &pb.EnqueueResponse{Items: items}, nil
		})
}

func submitCmd(req *pb.SubmitRequest) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SUBMIT, Body: &pb.Command_Submit{Submit: &pb.SubmitCmd{
		TaskId: req.GetTaskId(), Fence: req.GetFence(), Outcome: req.GetOutcome(),
		Result: req.GetResult(), Error: req.GetError(),
	}}}
}

func (q *queueService) Submit(ctx context.Context, req *pb.SubmitRequest) (*pb.SubmitResponse, error) {
	return write(q.s, ctx, pb.Queue_Submit_FullMethodName, req, &pb.SubmitResponse{}, submitCmd(req),
		func(res *pb.CommandResult) (*pb.SubmitResponse, error) {
			it, err := oneItem(res)
			if err != nil {
				return nil, err
			}
			if it.GetCode() == pb.Code_CODE_ALREADY_DONE {
				return &pb.SubmitResponse{AlreadyDone: true}, nil
			}
			if err := fsm.ItemError(it); err != nil {
				return nil, err
			}
			return &pb.SubmitResponse{}, nil
		})
}

// SubmitBatch proposes one Batch entry of Submits: the items share a Raft
// entry and an RPC, and each keeps its own answer.
func (q *queueService) SubmitBatch(ctx context.Context, req *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error) {
	items := req.GetItems()
	if n := len(items); n == 0 || n > fsm.MaxBatch {
		return nil, fieldError("items", fmt.Sprintf("%d not in 1..%d", n, fsm.MaxBatch))
	}
	cmds := make([]*pb.Command, len(items))
	for i, it := range items {
		cmds[i] = submitCmd(it)
		if err := fsm.Validate(cmds[i], q.s.node.Limits()); err != nil {
			var fe *fsm.FieldError
			if errors.As(err, &fe) {
				return nil, fe.InList("items", i) // keeps TooLarge
			}
			return nil, err
		}
	}
	cmd := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_BATCH, Body: &pb.Command_Batch{Batch: &pb.BatchCmd{Commands: cmds}}}
	return write(q.s, ctx, pb.Queue_SubmitBatch_FullMethodName, req, &pb.SubmitBatchResponse{}, cmd,
		func(res *pb.CommandResult) (*pb.SubmitBatchResponse, error) {
			if len(res.GetResults()) != len(items) {
				return nil, fmt.Errorf("fsm answered %d results for %d submits", len(res.GetResults()), len(items))
			}
			out := &pb.SubmitBatchResponse{Items: make([]*pb.ItemResult, len(items))}
			for i, r := range res.GetResults() {
				if err := fsm.ResultError(r); err != nil {
					return nil, err // validated above: the FSM disagrees with the edge
				}
				it, err := oneItem(r)
				if err != nil {
					return nil, err
				}
				out.Items[i] = it
			}
			return out, nil
		})
}

func (q *queueService) Nack(ctx context.Context, req *pb.NackRequest) (*pb.NackResponse, error) {
	cmd := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_NACK, Body: &pb.Command_Nack{Nack: &pb.NackCmd{
		TaskId: req.GetTaskId(), Fence: req.GetFence(), DelayNs: req.GetDelayNs(), Reason: req.GetReason(),
	}}}
	return write(q.s, ctx, pb.Queue_Nack_FullMethodName, req, &pb.NackResponse{}, cmd,
		func(res *pb.CommandResult) (*pb.NackResponse, error) {
			it, err := oneItem(res)
			if err != nil {
				return nil, err
			}
			if err := fsm.ItemError(it); err != nil {
				return nil, err
			}
			return &pb.NackResponse{State: it.GetState()}, nil
		})
}

// Cancel of a task already cancelled is a success (the FSM answers
// ALREADY_DONE); of a running or finished task it is WRONG_STATE.
func (q *queueService) Cancel(ctx context.Context, req *pb.CancelRequest) (*pb.CancelResponse, error) {
	cmd := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CANCEL,
		Body: &pb.Command_Cancel{Cancel: &pb.CancelCmd{TaskId: req.GetTaskId()}}}
	return write(q.s, ctx, pb.Queue_Cancel_FullMethodName, req, &pb.CancelResponse{}, cmd,
		func(res *pb.CommandResult) (*pb.CancelResponse, error) {
			it, err := oneItem(res)
			if err != nil {
				return nil, err
			}
			if err := fsm.ItemError(it); err != nil {
				return nil, err
			}
			return &pb.CancelResponse{}, nil
		})
}

func (q *queueService) RequeueDead(ctx context.Context, req *pb.RequeueDeadRequest) (*pb.RequeueDeadResponse, error) {
	if req.GetTaskId() == "" && req.GetTenant() == "" {
		req.Tenant = DefaultTenant
	}
	cmd := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_REQUEUE_DEAD, Body: &pb.Command_RequeueDead{RequeueDead: &pb.RequeueDeadCmd{
		TaskId: req.GetTaskId(), Queue: req.GetQueue(), Tenant: req.GetTenant(), Limit: req.GetLimit(),
	}}}
	return write(q.s, ctx, pb.Queue_RequeueDead_FullMethodName, req, &pb.RequeueDeadResponse{}, cmd,
		func(res *pb.CommandResult) (*pb.RequeueDeadResponse, error) {
			return &pb.RequeueDeadResponse{Items: res.GetItems()}, nil
		})
}

// GetTask is linearizable unless allow_stale: then any node answers from
// its replica, which may lag.
// AppliedIndexHeader is the header metadata key in which GetTask sends the
// applied index its answer was read at, NotFound answers included.
const AppliedIndexHeader = "docket-applied-index"

func (q *queueService) GetTask(ctx context.Context, req *pb.GetTaskRequest) (*pb.GetTaskResponse, error) {
	if req.GetTaskId() == "" {
		return nil, fieldError("task_id", "required")
	}
	return read(q.s, ctx, pb.Queue_GetTask_FullMethodName, req, &pb.GetTaskResponse{}, req.GetAllowStale(),
		func() (*pb.GetTaskResponse, error) {
			t, applied, err := q.s.node.FSM().GetTaskAt(req.GetTaskId())
			// The applied index also travels as header metadata, so that a
			// NotFound answer says which state it was read from too. A
			// forwarded read's header is lost; only stale reads need it.
			_ = grpc.SetHeader(ctx, metadata.Pairs(AppliedIndexHeader, strconv.FormatUint(applied, 10)))
			if err != nil {
				return nil, err
			}
			return &pb.GetTaskResponse{Task: t, AppliedIndex: applied}, nil
		})
}

// Stats is linearizable: the request has no way to allow a stale answer,
// and an operator comparing counts before and after an action must not
// see them go back in time by asking another node.
func (q *queueService) Stats(ctx context.Context, req *pb.StatsRequest) (*pb.StatsResponse, error) {
	return read(q.s, ctx, pb.Queue_Stats_FullMethodName, req, &pb.StatsResponse{}, false,
		func() (*pb.StatsResponse, error) {
			st, next, err := q.s.node.FSM().StatsPage(req.GetQueue(), req.GetTenant(), req.GetCursor())
			if errors.Is(err, storage.ErrBadCursor) {
				return nil, fieldError("cursor", "not a cursor of this listing")
			}
			if err != nil {
				return nil, err
			}
			return &pb.StatsResponse{Queues: st, NextCursor: next}, nil
		})
}

// ListDead pages through a queue's dead letters, oldest id first. It is
// linearizable, like Stats. limit defaults to 100 and is capped at
// fsm.MaxBatch, what one RequeueDead may replay.
func (q *queueService) ListDead(ctx context.Context, req *pb.ListDeadRequest) (*pb.ListDeadResponse, error) {
	queue, tenant := req.GetQueue(), req.GetTenant()
	if tenant == "" {
		tenant = DefaultTenant
	}
	if queue == "" {
		return nil, fieldError("queue", "required")
	}
	if strings.Contains(queue, "/") || strings.Contains(tenant, "/") {
		return nil, fieldError("queue", "queue and tenant may not contain '/'")
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, fsm.MaxBatch)
	return read(q.s, ctx, pb.Queue_ListDead_FullMethodName, req, &pb.ListDeadResponse{}, false,
		func() (*pb.ListDeadResponse, error) {
			tasks, next, err := q.s.node.FSM().ListTasks(queue, tenant, pb.TaskState_TASK_STATE_DEAD, req.GetCursor(), limit)
			if err != nil {
				return nil, err
			}
			return &pb.ListDeadResponse{Tasks: tasks, NextCursor: next}, nil
		})
}
