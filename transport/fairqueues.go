package transport

import (
	"context"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Fair queues (feature level 16). SetKeyLimit is a write like
// SetQueueLimits: admitted where it arrives (service.Admit checks the key
// and the values), run on the leader, and answered changed=false when the
// key already was so (the FSM's ALREADY_DONE), so repeating it is safe.
// Below level 16 apply's gate refuses it before proposing
// (service.ErrFeatureDisabled, FailedPrecondition). Who may call either
// is in roles.go: SetKeyLimit needs admin over the queue's tenant,
// ListKeys reader or admin over it.

// SetKeyLimit overrides one key's per-key limit and weight.
func (q *queueService) SetKeyLimit(ctx context.Context, req *pb.SetKeyLimitRequest) (*pb.SetKeyLimitResponse, error) {
	return write(q.s, ctx, pb.Queue_SetKeyLimit_FullMethodName, req, &pb.SetKeyLimitResponse{},
		func(res *pb.CommandResult) (*pb.SetKeyLimitResponse, error) {
			changed, err := queueChanged(res)
			return &pb.SetKeyLimitResponse{Changed: changed}, err
		})
}

// ListKeys lists a keyed queue's top keys by backlog and by running. It is
// linearizable, like Stats: the page an operator reads to find a noisy
// key should not go back in time when the next call lands elsewhere.
func (q *queueService) ListKeys(ctx context.Context, req *pb.ListKeysRequest) (*pb.ListKeysResponse, error) {
	if err := service.CheckListKeys(req); err != nil {
		return nil, err
	}
	return read(q.s, ctx, pb.Queue_ListKeys_FullMethodName, req, &pb.ListKeysResponse{}, false,
		func(c service.Consistency) (*pb.ListKeysResponse, error) {
			return q.s.svc.Keys(ctx, req, c)
		})
}
