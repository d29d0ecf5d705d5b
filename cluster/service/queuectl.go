package service

import (
	"context"
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// PurgeStep is how many tasks one PurgeQueue command deletes: the most
// the FSM takes (pb.MaxBatch), so a purge of n tasks is n/1000 entries,
// each a bounded apply.
const PurgeStep = pb.MaxBatch

// SetQueuePausedCommand builds the pause (or resume) of one queue; an
// empty tenant is the default tenant.
func SetQueuePausedCommand(queue, tenant string, paused bool) *pb.Command {
	if tenant == "" {
		tenant = pb.DefaultTenant
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_PAUSED, Body: &pb.Command_SetQueuePaused{
		SetQueuePaused: &pb.SetQueuePausedCmd{Queue: queue, Tenant: tenant, Paused: paused}}}
}

// PurgeQueueCommand builds one step of a purge of one queue's waiting
// tasks, or its dead letters; an empty tenant is the default tenant.
func PurgeQueueCommand(queue, tenant string, dead bool) *pb.Command {
	if tenant == "" {
		tenant = pb.DefaultTenant
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_PURGE_QUEUE, Body: &pb.Command_PurgeQueue{
		PurgeQueue: &pb.PurgeQueueCmd{Queue: queue, Tenant: tenant, Dead: dead, Limit: PurgeStep}}}
}

// PurgeQueue runs the purge cmd (PurgeQueueCommand) on the leader, one
// command of up to PurgeStep tasks at a time, until one finds fewer: a
// single entry deleting a million tasks would hold the apply goroutine
// for seconds. It returns how many tasks it deleted; on an error, those
// deleted before it (the error says the count too). Tasks enqueued while
// it runs may be deleted as well.
func (s *Service) PurgeQueue(ctx context.Context, cmd *pb.Command) (uint64, error) {
	var purged uint64
	for {
		res, err := s.Propose(ctx, cmd)
		if err == nil {
			err = pb.ResultError(res)
		}
		if err != nil {
			if purged > 0 {
				return purged, fmt.Errorf("purge of %s/%s stopped after %d tasks: %w",
					cmd.GetPurgeQueue().GetQueue(), cmd.GetPurgeQueue().GetTenant(), purged, err)
			}
			return 0, err
		}
		n := len(res.GetItems())
		purged += uint64(n)
		if n < int(cmd.GetPurgeQueue().GetLimit()) {
			return purged, nil
		}
		if err := ctx.Err(); err != nil {
			return purged, err
		}
	}
}
