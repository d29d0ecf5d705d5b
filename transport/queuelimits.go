package transport

import (
	"context"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// SetQueueLimits answers changed=false when every given value was already
// so (the FSM's ALREADY_DONE): repeating it is safe. Who may call it is
// in cluster's role table and requestTenants: admin over the queue's
// tenant, or over every tenant for a tenant's own limit.
func (q *queueService) SetQueueLimits(ctx context.Context, req *pb.SetQueueLimitsRequest) (*pb.SetQueueLimitsResponse, error) {
	return write(q.s, ctx, pb.Queue_SetQueueLimits_FullMethodName, req, &pb.SetQueueLimitsResponse{},
		func(res *pb.CommandResult) (*pb.SetQueueLimitsResponse, error) {
			changed, err := queueChanged(res)
			return &pb.SetQueueLimitsResponse{Changed: changed}, err
		})
}
