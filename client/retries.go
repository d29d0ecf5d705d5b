package client

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/dockethq/docket/proto/docketv1"
)

// Retries (feature level 12; an older cluster answers ErrFeatureDisabled).
// SetQueueRetry, ResetQueue and UpdateTask set a value, so a retry after
// ErrOutcomeUnknown is harmless (its answer may then say unchanged).
// Snooze is not retried: like Nack, a second round after the first was
// applied would only be told its fence is stale.
var (
	opSetQueueRetry = op{name: "SetQueueRetry", repeatable: true}
	opResetQueue    = op{name: "ResetQueue", repeatable: true}
	opSnooze        = op{name: "Snooze"}
	opUpdateTask    = op{name: "UpdateTask", repeatable: true}
)

// SetQueueRetry sets a queue's retry policy (with req.HasRetry; a nil or
// zero-base policy clears it) and/or how long its dead letters are kept
// (with req.HasDeadRetention; 0 is the default, 14 days). changed is false
// when the queue already had that configuration. Admin over the tenant.
func (c *Client) SetQueueRetry(ctx context.Context, req *docketv1.SetQueueRetryRequest) (changed bool, err error) {
	_, err = c.invoke(ctx, opSetQueueRetry, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).SetQueueRetry(ctx, req, opts...)
		changed = r.GetChanged()
		return err
	})
	return changed, err
}

// ResetQueue deletes a queue's whole configuration (pause, retry policy,
// dead-letter retention): it has the defaults again, and an empty queue
// then leaves Stats. changed is false when it had none. Admin.
func (c *Client) ResetQueue(ctx context.Context, queue, tenant string) (changed bool, err error) {
	req := &docketv1.ResetQueueRequest{Queue: queue, Tenant: tenant}
	_, err = c.invoke(ctx, opResetQueue, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).ResetQueue(ctx, req, opts...)
		changed = r.GetChanged()
		return err
	})
	return changed, err
}

// Snooze hands a task the caller holds (its fence) back, to be claimable
// again after delay, without using an attempt. It returns the task's new
// state (DELAYED, or PENDING for no delay); a fence that is no longer the
// task's answers ErrStaleFence.
func (c *Client) Snooze(ctx context.Context, taskID string, fence uint64, delay time.Duration) (docketv1.TaskState, error) {
	return c.snoozeAs(ctx, taskID, fence, c.cfg.tenant, delay)
}

// snoozeAs is Snooze of a task of tenant: a Worker's tasks are its
// configured tenant's, which need not be the Client's.
func (c *Client) snoozeAs(ctx context.Context, taskID string, fence uint64, tenant string, delay time.Duration) (docketv1.TaskState, error) {
	req := &docketv1.SnoozeRequest{TaskId: taskID, Fence: fence, DelayNs: int64(delay), Tenant: tenant}
	var st docketv1.TaskState
	_, err := c.invoke(ctx, opSnooze, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).Snooze(ctx, req, opts...)
		st = r.GetState()
		return err
	})
	return st, err
}

// TaskUpdate is what UpdateTask changes: a nil Priority keeps it, a zero
// RunAt keeps when the task runs.
type TaskUpdate struct {
	Priority *uint32
	RunAt    time.Time
}

// UpdateTask changes a pending or delayed task's priority and/or run-at,
// and returns its state after (PENDING, or DELAYED when RunAt is ahead).
// A running or finished task answers ErrWrongState.
func (c *Client) UpdateTask(ctx context.Context, taskID string, u TaskUpdate) (docketv1.TaskState, error) {
	req := &docketv1.UpdateTaskRequest{TaskId: taskID, Tenant: c.cfg.tenant}
	if u.Priority != nil {
		req.HasPriority, req.Priority = true, *u.Priority
	}
	if !u.RunAt.IsZero() {
		req.RunAt = u.RunAt.UnixNano()
	}
	var st docketv1.TaskState
	_, err := c.invoke(ctx, opUpdateTask, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).UpdateTask(ctx, req, opts...)
		st = r.GetState()
		return err
	})
	return st, err
}

var opListTasks = op{name: "ListTasks", repeatable: true}

// ListTasks pages through one queue's tasks in one state (pending,
// delayed, running or dead) of req.Tenant ("" is the default tenant), in
// that index's order; pass the answer's NextCursor to continue. Fences
// are never in the answer. Reader or admin.
func (c *Client) ListTasks(ctx context.Context, req *docketv1.ListTasksRequest) (*docketv1.ListTasksResponse, error) {
	var resp *docketv1.ListTasksResponse
	_, err := c.invoke(ctx, opListTasks, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).ListTasks(ctx, req, opts...)
		resp = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
