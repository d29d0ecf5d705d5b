package cluster

import (
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
