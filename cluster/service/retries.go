package service

import (
	"context"
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Commands of feature level 12 (fsm.LevelRetries): a queue's retry policy
// and dead-letter retention, its reset, snooze and task updates. The
// leader's gate (Check) refuses them until the cluster latched the level.

// SetQueueRetryCommand builds the change of one queue's retry policy
// and/or dead-letter retention; an empty tenant is the default tenant.
func SetQueueRetryCommand(req *pb.SetQueueRetryRequest) *pb.Command {
	tn := req.GetTenant()
	if tn == "" {
		tn = pb.DefaultTenant
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_RETRY, Body: &pb.Command_SetQueueRetry{
		SetQueueRetry: &pb.SetQueueRetryCmd{Queue: req.GetQueue(), Tenant: tn,
			HasRetry: req.GetHasRetry(), Retry: req.GetRetry(),
			HasDeadRetention: req.GetHasDeadRetention(), DeadRetentionNs: req.GetDeadRetentionNs()}}}
}

// ResetQueueCommand builds the deletion of one queue's whole
// configuration; an empty tenant is the default tenant.
func ResetQueueCommand(queue, tenant string) *pb.Command {
	if tenant == "" {
		tenant = pb.DefaultTenant
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_RETRY, Body: &pb.Command_SetQueueRetry{
		SetQueueRetry: &pb.SetQueueRetryCmd{Queue: queue, Tenant: tenant, Reset_: true}}}
}

// SnoozeCommand builds the Snooze of req.
func SnoozeCommand(req *pb.SnoozeRequest) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SNOOZE, Body: &pb.Command_Snooze{Snooze: &pb.SnoozeCmd{
		TaskId: req.GetTaskId(), Fence: req.GetFence(), DelayNs: req.GetDelayNs(), Tenant: req.GetTenant()}}}
}

// UpdateTaskCommand builds the UpdateTask of req.
func UpdateTaskCommand(req *pb.UpdateTaskRequest) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_UPDATE_TASK, Body: &pb.Command_UpdateTask{UpdateTask: &pb.UpdateTaskCmd{
		TaskId: req.GetTaskId(), Tenant: req.GetTenant(), HasPriority: req.GetHasPriority(), Priority: req.GetPriority(), RunAt: req.GetRunAt()}}}
}

// listTenantDead pages through the dead letters of every queue of the
// request's tenant at consistency c: up to limit (0: the default; at
// most MaxBatch).
func (s *Service) listTenantDead(ctx context.Context, req *pb.ListDeadRequest, c Consistency) ([]*pb.Task, string, error) {
	n := int(req.GetLimit())
	if n <= 0 {
		n = pb.DefaultListLimit
	}
	n = min(n, pb.MaxBatch)
	if err := s.readAt(ctx, c); err != nil {
		return nil, "", err
	}
	tasks, next, err := s.r.FSM().ListTenantDead(req.GetTenant(), req.GetCursor(), n)
	if err != nil {
		return nil, "", fmt.Errorf("list dead letters of tenant %s: %w", req.GetTenant(), err)
	}
	return tasks, next, nil
}
