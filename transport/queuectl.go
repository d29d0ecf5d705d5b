package transport

import (
	"context"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// PauseQueue and ResumeQueue answer changed=false when the queue already
// was so (the FSM's ALREADY_DONE): repeating either is safe.
func (q *queueService) PauseQueue(ctx context.Context, req *pb.PauseQueueRequest) (*pb.PauseQueueResponse, error) {
	return write(q.s, ctx, pb.Queue_PauseQueue_FullMethodName, req, &pb.PauseQueueResponse{},
		func(res *pb.CommandResult) (*pb.PauseQueueResponse, error) {
			changed, err := queueChanged(res)
			return &pb.PauseQueueResponse{Changed: changed}, err
		})
}

func (q *queueService) ResumeQueue(ctx context.Context, req *pb.ResumeQueueRequest) (*pb.ResumeQueueResponse, error) {
	return write(q.s, ctx, pb.Queue_ResumeQueue_FullMethodName, req, &pb.ResumeQueueResponse{},
		func(res *pb.CommandResult) (*pb.ResumeQueueResponse, error) {
			changed, err := queueChanged(res)
			return &pb.ResumeQueueResponse{Changed: changed}, err
		})
}

func queueChanged(res *pb.CommandResult) (bool, error) {
	it, err := oneItem(res)
	if err != nil {
		return false, err
	}
	if it.GetCode() == pb.Code_CODE_ALREADY_DONE {
		return false, nil
	}
	return true, pb.ItemError(it)
}

// PurgeQueue runs on the leader as a series of commands
// (service.Service.PurgeQueue); a follower forwards the whole call.
func (q *queueService) PurgeQueue(ctx context.Context, req *pb.PurgeQueueRequest) (*pb.PurgeQueueResponse, error) {
	cmd, err := q.s.admit(ctx, req)
	if err != nil {
		return nil, err
	}
	return onLeader(q.s, ctx, pb.Queue_PurgeQueue_FullMethodName, req, &pb.PurgeQueueResponse{},
		func(ctx context.Context) (*pb.PurgeQueueResponse, error) {
			n, err := q.s.svc.PurgeQueue(ctx, cmd)
			if err != nil {
				return nil, err
			}
			return &pb.PurgeQueueResponse{Purged: n}, nil
		})
}
