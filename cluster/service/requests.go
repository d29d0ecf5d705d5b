package service

import (
	"errors"
	"fmt"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Check validates cmd against the node's limits, with times judged by
// the node's clock. The API layer calls it once, on the node that received
// the request, so a bad value costs no hop and names its field; a leader
// checks a forwarded request again only when the sender did not prove it
// is a node (transport's check). The FSM judges every command again in
// apply, against the leader's stamped time: that check is the rule.
func (s *Service) Check(cmd *pb.Command) error {
	s.checks.Add(1)
	lim, now := s.r.Limits(), s.r.Now().UnixNano()
	if err := fsm.ValidateAt(cmd, lim, now); err != nil {
		return err
	}
	if cmd.GetType() != pb.CommandType_COMMAND_TYPE_BATCH {
		return nil
	}
	// A Batch's own check is its shape; each command is checked on its
	// own, and a bad one is named by its place.
	for i, sub := range cmd.GetBatch().GetCommands() {
		if err := fsm.ValidateAt(sub, lim, now); err != nil {
			var fe *pb.FieldError
			if errors.As(err, &fe) {
				return fe.InList("items", i) // keeps TooLarge
			}
			return err
		}
	}
	return nil
}

// EnqueueCommand builds the Enqueue of req; a task without a tenant is the
// default tenant's.
func EnqueueCommand(req *pb.EnqueueRequest) *pb.Command {
	for _, t := range req.GetTasks() {
		if t != nil && t.Tenant == "" {
			t.Tenant = pb.DefaultTenant
		}
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE,
		Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: req.GetTasks()}}}
}

// ClaimCommand fills req's defaults (tenant, one task, the service's
// default lease) and builds its Claim.
func (s *Service) ClaimCommand(req *pb.ClaimRequest) *pb.Command {
	if req.GetTenant() == "" {
		req.Tenant = pb.DefaultTenant
	}
	if req.GetMaxTasks() == 0 {
		req.MaxTasks = pb.DefaultMaxTasks
	}
	if req.GetLeaseNs() == 0 {
		req.LeaseNs = int64(s.cfg.DefaultLease)
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CLAIM, Body: &pb.Command_Claim{Claim: &pb.ClaimCmd{
		Queue: req.GetQueue(), Tenant: req.GetTenant(), WorkerId: req.GetWorkerId(),
		LeaseNs: req.GetLeaseNs(), MaxTasks: req.GetMaxTasks(),
	}}}
}

// HeartbeatCommand builds the Heartbeat of items.
func HeartbeatCommand(items []*pb.HeartbeatItem) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_HEARTBEAT,
		Body: &pb.Command_Heartbeat{Heartbeat: &pb.HeartbeatCmd{Items: items}}}
}

// SubmitCommand builds the Submit of req.
func SubmitCommand(req *pb.SubmitRequest) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SUBMIT, Body: &pb.Command_Submit{Submit: &pb.SubmitCmd{
		TaskId: req.GetTaskId(), Fence: req.GetFence(), Outcome: req.GetOutcome(),
		Result: req.GetResult(), Error: req.GetError(), Tenant: req.GetTenant(),
	}}}
}

// SubmitBatchCommand builds one Batch entry of req's Submits: they share a
// Raft entry and each keeps its own answer.
func SubmitBatchCommand(req *pb.SubmitBatchRequest) (*pb.Command, error) {
	items := req.GetItems()
	if n := len(items); n == 0 || n > pb.MaxBatch {
		return nil, &pb.FieldError{Field: "items", Reason: fmt.Sprintf("%d not in 1..%d", n, pb.MaxBatch)}
	}
	cmds := make([]*pb.Command, len(items))
	for i, it := range items {
		cmds[i] = SubmitCommand(it)
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_BATCH, Body: &pb.Command_Batch{Batch: &pb.BatchCmd{Commands: cmds}}}, nil
}

// NackCommand builds the Nack of req.
func NackCommand(req *pb.NackRequest) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_NACK, Body: &pb.Command_Nack{Nack: &pb.NackCmd{
		TaskId: req.GetTaskId(), Fence: req.GetFence(), DelayNs: req.GetDelayNs(), Reason: req.GetReason(), Tenant: req.GetTenant(),
	}}}
}

// CancelCommand builds the Cancel of req.
func CancelCommand(req *pb.CancelRequest) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CANCEL,
		Body: &pb.Command_Cancel{Cancel: &pb.CancelCmd{TaskId: req.GetTaskId(), Tenant: req.GetTenant()}}}
}

// RequeueDeadCommand builds the RequeueDead of req; without a task id or
// a tenant it is the default tenant's.
func RequeueDeadCommand(req *pb.RequeueDeadRequest) *pb.Command {
	if req.GetTaskId() == "" && req.GetTenant() == "" {
		req.Tenant = pb.DefaultTenant
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_REQUEUE_DEAD, Body: &pb.Command_RequeueDead{RequeueDead: &pb.RequeueDeadCmd{
		TaskId: req.GetTaskId(), Queue: req.GetQueue(), Tenant: req.GetTenant(), Limit: req.GetLimit(),
	}}}
}
