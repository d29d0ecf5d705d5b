package service

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Admit turns a write request into the command the leader runs, in one
// step where the request arrived: it builds the command, fills the
// request's defaults and checks it against the limits and the clock of
// this node. checked says a node of the cluster forwarded the request
// after admitting it there (the caller proved it with a server
// certificate): the command is built but not checked twice, and apply
// judges it again in any case.
//
// An Enqueue is refused with *MemoryLimitError while this node is at its
// memory limit (memory.go), checked or not: the leader checks its own.
//
// The API layer calls Admit once per request, then finds the leader, then
// runs the command; it never checks a command itself.
func (s *Service) Admit(req proto.Message, checked bool) (*pb.Command, error) {
	var cmd *pb.Command
	var own error // a request's field that its command does not carry
	switch r := req.(type) {
	case *pb.EnqueueRequest:
		// New work is refused at the memory limit, here where it arrived
		// and again on the leader; what frees memory (claims, submits,
		// nacks) is not.
		if err := s.mem.check(); err != nil {
			return nil, err
		}
		cmd = EnqueueCommand(r)
	case *pb.ClaimRequest:
		cmd = s.ClaimCommand(r)
		if r.GetWaitNs() < 0 {
			own = &pb.FieldError{Field: "wait_ns", Reason: "negative"}
		}
	case *pb.HeartbeatRequest:
		cmd = HeartbeatCommand(r.GetItems())
	case *pb.SubmitRequest:
		cmd = SubmitCommand(r)
	case *pb.SubmitBatchRequest:
		c, err := SubmitBatchCommand(r)
		if err != nil {
			return nil, err
		}
		cmd = c
	case *pb.NackRequest:
		cmd = NackCommand(r)
	case *pb.CancelRequest:
		cmd = CancelCommand(r)
	case *pb.RequeueDeadRequest:
		cmd = RequeueDeadCommand(r)
	case *pb.PauseQueueRequest:
		cmd = SetQueuePausedCommand(r.GetQueue(), r.GetTenant(), true)
	case *pb.ResumeQueueRequest:
		cmd = SetQueuePausedCommand(r.GetQueue(), r.GetTenant(), false)
	case *pb.PurgeQueueRequest:
		cmd = PurgeQueueCommand(r.GetQueue(), r.GetTenant(), r.GetDead())
	case *pb.SetQueueLimitsRequest:
		cmd = QueueLimitsCommand(r) // fairqueues.go: the per-key fields too
	case *pb.SetKeyLimitRequest:
		cmd = SetKeyLimitCommand(r.GetQueue(), r.GetTenant(), r.GetKey(), r.MaxRunning, r.Weight)
	case *pb.SetQueueRetryRequest:
		cmd = SetQueueRetryCommand(r)
	case *pb.ResetQueueRequest:
		cmd = ResetQueueCommand(r.GetQueue(), r.GetTenant())
	case *pb.SnoozeRequest:
		cmd = SnoozeCommand(r)
	case *pb.UpdateTaskRequest:
		cmd = UpdateTaskCommand(r)
	case *pb.PutScheduleRequest:
		cmd = PutScheduleCommand(r.GetSchedule())
	case *pb.RemoveScheduleRequest:
		cmd = RemoveScheduleCommand(r.GetTenant(), r.GetName())
	default:
		return nil, fmt.Errorf("admit: %T is not a write request", req)
	}
	if checked {
		return cmd, nil
	}
	if own != nil {
		return nil, own
	}
	if err := CheckFairFields(cmd); err != nil {
		return nil, err
	}
	if err := s.Check(cmd); err != nil {
		return nil, err
	}
	return cmd, nil
}
