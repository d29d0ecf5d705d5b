package transport

import (
	"context"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// SetQueueRetry and ResetQueue answer changed=false when the queue's
// configuration already was so (the FSM's ALREADY_DONE): both are safe to
// repeat.
func (q *queueService) SetQueueRetry(ctx context.Context, req *pb.SetQueueRetryRequest) (*pb.SetQueueRetryResponse, error) {
	return write(q.s, ctx, pb.Queue_SetQueueRetry_FullMethodName, req, &pb.SetQueueRetryResponse{},
		func(res *pb.CommandResult) (*pb.SetQueueRetryResponse, error) {
			changed, err := queueChanged(res)
			return &pb.SetQueueRetryResponse{Changed: changed}, err
		})
}

func (q *queueService) ResetQueue(ctx context.Context, req *pb.ResetQueueRequest) (*pb.ResetQueueResponse, error) {
	return write(q.s, ctx, pb.Queue_ResetQueue_FullMethodName, req, &pb.ResetQueueResponse{},
		func(res *pb.CommandResult) (*pb.ResetQueueResponse, error) {
			changed, err := queueChanged(res)
			return &pb.ResetQueueResponse{Changed: changed}, err
		})
}

// Snooze answers like Nack: a stale fence is FailedPrecondition with the
// stale-fence reason, and the state is where the task went.
func (q *queueService) Snooze(ctx context.Context, req *pb.SnoozeRequest) (*pb.SnoozeResponse, error) {
	return write(q.s, ctx, pb.Queue_Snooze_FullMethodName, req, &pb.SnoozeResponse{},
		func(res *pb.CommandResult) (*pb.SnoozeResponse, error) {
			st, err := oneState(res)
			return &pb.SnoozeResponse{State: st}, err
		})
}

// UpdateTask of a task already so is a success; of a running or finished
// task it is WRONG_STATE (FailedPrecondition).
func (q *queueService) UpdateTask(ctx context.Context, req *pb.UpdateTaskRequest) (*pb.UpdateTaskResponse, error) {
	return write(q.s, ctx, pb.Queue_UpdateTask_FullMethodName, req, &pb.UpdateTaskResponse{},
		func(res *pb.CommandResult) (*pb.UpdateTaskResponse, error) {
			st, err := oneState(res)
			return &pb.UpdateTaskResponse{State: st}, err
		})
}

// oneState is the state of a one-task command's item, or its error;
// ALREADY_DONE is a success.
func oneState(res *pb.CommandResult) (pb.TaskState, error) {
	it, err := oneItem(res)
	if err != nil {
		return 0, err
	}
	if it.GetCode() == pb.Code_CODE_ALREADY_DONE {
		return it.GetState(), nil
	}
	return it.GetState(), pb.ItemError(it)
}
