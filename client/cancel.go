package client

import (
	"context"
	"errors"

	"google.golang.org/grpc"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

var (
	// ErrCancelRequested is the cause (context.Cause) of a handler's ctx
	// when an operator cancelled the task while it ran: a heartbeat said
	// so. The handler should stop; the Worker then ends the task with a
	// Nack under its fence (or a Submit, if the handler returned nil) and
	// the server marks it CANCELLED, never retried.
	ErrCancelRequested = errors.New("docket: cancel requested")

	// ErrTimedOut means the task's claim ran past its execution deadline
	// (NewTask.timeout_ns): a heartbeat was refused with CODE_TIMED_OUT
	// (gRPC FailedPrecondition, reason TIMED_OUT). It is also the cause of
	// the handler's ctx then. The server ends the claim itself: FAILED,
	// or retried when the task asked for retry_on_timeout.
	ErrTimedOut = errors.New("docket: execution timeout")

	// ErrCancelled means a Submit came under the fence of a claim that an
	// operator cancelled while it ran (gRPC FailedPrecondition, reason
	// CANCELLED; item code CODE_CANCELLED): the task ended CANCELLED,
	// nothing of the Submit was stored, and it will not run again. Drop
	// the result. Clusters at feature level 15; older ones answer such a
	// Submit with success and store the result on the CANCELLED task.
	ErrCancelled = errors.New("docket: task cancelled")
)

// CancelResult is what CancelTask did to a task.
type CancelResult struct {
	// Requested is true when the task was running: it is marked, its
	// worker learns it at its next heartbeat, and the task ends CANCELLED
	// when the worker answers or its lease or deadline passes. False means
	// the task was pending or delayed and is CANCELLED now.
	Requested bool
	// State is the task's state after the call.
	State docketv1.TaskState
}

// CancelTask cancels a task and says how: a pending or delayed task ends
// CANCELLED at once; a running one (clusters at feature level 9) is
// marked cancel-requested. Cancelling again is a success. A finished task
// is ErrWrongState, as is a running one on an older cluster. When an
// attempt whose answer was lost may have applied and the retry answers
// ErrWrongState, CancelTask reads the task and reports success if it is
// cancelled: that attempt is what cancelled it.
func (c *Client) CancelTask(ctx context.Context, taskID string) (CancelResult, error) {
	req := &docketv1.CancelRequest{TaskId: taskID, Tenant: c.cfg.tenant}
	var resp *docketv1.CancelResponse
	attempts, err := c.invoke(ctx, opCancel, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).Cancel(ctx, req, opts...)
		resp = r
		return err
	})
	if attempts > 1 && errors.Is(err, ErrWrongState) {
		// An attempt whose answer was lost may have cancelled it.
		if t, gerr := c.ReadTask(ctx, taskID); gerr == nil && t.GetState() == docketv1.TaskState_TASK_STATE_CANCELLED {
			return CancelResult{State: t.GetState()}, nil
		}
	}
	if err != nil {
		return CancelResult{}, err
	}
	return CancelResult{Requested: resp.GetCancelRequested(), State: resp.GetState()}, nil
}
