package client

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// The common path in Go types: these calls take and return TaskInfo,
// State and time.Duration, and run the wire-typed calls they are named
// after (Get: ReadTask, GetStale: ReadTaskStale, Wait: WaitResult,
// ClaimTasks: Claim, CompleteClaim and FailClaim: Submit, NackClaim:
// Nack), with the same retries.

// Get reads a task linearizably, as ReadTask does: the answer reflects
// every write acknowledged before the call. It needs a leader. The
// TaskInfo has no fence.
func (c *Client) Get(ctx context.Context, taskID string) (*TaskInfo, error) {
	p, err := c.readTask(ctx, taskID, false)
	if err != nil {
		return nil, err
	}
	return readInfo(p), nil
}

// GetStale reads a task from any node's replica, as ReadTaskStale does:
// it may lag the leader but answers without one.
func (c *Client) GetStale(ctx context.Context, taskID string) (*TaskInfo, error) {
	p, err := c.readTask(ctx, taskID, true)
	if err != nil {
		return nil, err
	}
	return readInfo(p), nil
}

// Wait waits until the task is finished (State.Finished: completed,
// failed, dead or cancelled) and returns it, as WaitResult does; when ctx
// ends first it returns an error wrapping ctx's error. Bound the wait with
// ctx's deadline.
func (c *Client) Wait(ctx context.Context, taskID string) (*TaskInfo, error) {
	p, err := c.WaitResult(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return readInfo(p), nil
}

// ClaimOption sets a field of a ClaimTasks call. The options are named
// Claim*, apart from the Client's (With*) and a task's (Task*).
type ClaimOption func(*docketv1.ClaimRequest)

// ClaimMax sets how many tasks the call may take at most; the default is
// the server's (docketv1.DefaultMaxTasks).
func ClaimMax(n uint32) ClaimOption { return func(r *docketv1.ClaimRequest) { r.MaxTasks = n } }

// ClaimLease sets the lease of the claimed tasks; the default is the
// server's (DefaultLease). Past it, without a Heartbeat, a task is
// claimable again and the claim's fence is stale.
func ClaimLease(d time.Duration) ClaimOption {
	return func(r *docketv1.ClaimRequest) { r.LeaseNs = int64(d) }
}

// ClaimWait makes the call a long poll: it waits up to d (at most
// MaxWait, and within ctx's deadline) for a task when none is claimable.
func ClaimWait(d time.Duration) ClaimOption {
	return func(r *docketv1.ClaimRequest) { r.WaitNs = int64(d) }
}

// ClaimWorkerID names the worker on the claimed tasks, for operators. The
// default is hostname-pid-random, one for the process, so that an
// operator can tell which process holds a claim.
func ClaimWorkerID(id string) ClaimOption {
	return func(r *docketv1.ClaimRequest) { r.WorkerId = id }
}

// ClaimTenant claims from the queue of another tenant than the Client's
// (WithRequestTenant; empty is the default tenant).
func ClaimTenant(tenant string) ClaimOption {
	return func(r *docketv1.ClaimRequest) { r.Tenant = tenant }
}

// ClaimTasks claims tasks of a queue by hand, as Claim does, for a caller
// that does not run a Worker: each TaskInfo carries its claim's Fence.
// Finish each with CompleteClaim, FailClaim or NackClaim before its lease
// ends (a Worker heartbeats for its handlers; a caller of ClaimTasks
// extends leases with Heartbeat). No task claimable, and the wait over, is
// no tasks and no error.
func (c *Client) ClaimTasks(ctx context.Context, queue string, opts ...ClaimOption) ([]*TaskInfo, error) {
	req := &docketv1.ClaimRequest{Queue: queue, Tenant: c.cfg.tenant}
	for _, o := range opts {
		o(req)
	}
	if req.WorkerId == "" {
		req.WorkerId = processWorkerID()
	}
	ps, err := c.Claim(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make([]*TaskInfo, len(ps))
	for i, p := range ps {
		out[i] = NewTaskInfo(p)
	}
	return out, nil
}

// CompleteClaim completes a claimed task with a result, under the claim's
// fence, as Submit does. alreadyDone is true when this completion was
// accepted before. ErrStaleFence means the lease was lost and nothing was
// stored; ErrCancelled that the task was cancelled while it ran.
func (c *Client) CompleteClaim(ctx context.Context, t *TaskInfo, result []byte) (alreadyDone bool, err error) {
	return c.submitClaim(ctx, t, docketv1.Outcome_OUTCOME_COMPLETED, result, "")
}

// FailClaim fails a claimed task for good, with a reason that becomes its
// LastError, as Submit with OUTCOME_FAILED does: it is not retried. Use
// NackClaim for a failure worth another attempt.
func (c *Client) FailClaim(ctx context.Context, t *TaskInfo, reason string) (alreadyDone bool, err error) {
	return c.submitClaim(ctx, t, docketv1.Outcome_OUTCOME_FAILED, nil, reason)
}

func (c *Client) submitClaim(ctx context.Context, t *TaskInfo, o docketv1.Outcome, result []byte, reason string) (bool, error) {
	if t == nil {
		return false, fmt.Errorf("%s: %w: nil task", opSubmit.name, ErrInvalidArgument)
	}
	return c.Submit(ctx, &docketv1.SubmitRequest{
		TaskId: t.ID, Fence: t.Fence, Outcome: o, Result: result, Error: reason, Tenant: t.Tenant,
	})
}

// NackClaim gives a claimed task back for another attempt after delay (0:
// the task's or queue's retry policy decides), with a reason that becomes
// its LastError, and returns its new state: StateDead when it ran out of
// attempts. Like Nack it is not retried after a lost leadership.
func (c *Client) NackClaim(ctx context.Context, t *TaskInfo, delay time.Duration, reason string) (State, error) {
	if t == nil {
		return StateUnknown, fmt.Errorf("%s: %w: nil task", opNack.name, ErrInvalidArgument)
	}
	s, err := c.Nack(ctx, &docketv1.NackRequest{
		TaskId: t.ID, Fence: t.Fence, DelayNs: int64(delay), Reason: reason, Tenant: t.Tenant,
	})
	if err != nil {
		return StateUnknown, err
	}
	return StateOf(s), nil
}

// processWorkerID is the worker id of ClaimTasks calls that name none.
var processWorkerID = sync.OnceValue(defaultWorkerID)

// defaultWorkerID names a worker that was given no id:
// hostname-pid-random, unique per call.
func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomHex(4))
}
