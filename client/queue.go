package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// MaxWait is the longest long-poll the server honours for Claim and
// WaitResult by default (docketv1.MaxWait).
const MaxWait = docketv1.MaxWait

// The operations and how they may be retried. repeatable marks the ones
// that are safe to send again after ErrOutcomeUnknown: Enqueue carries an
// idempotency key, Submit and Heartbeat a fence, a lost Claim reply only
// leaves a lease to expire, Cancel is checked (see Cancel), and reads are
// reads. Nack is not: a repeated Nack of an applied one would answer
// ErrStaleFence and hide that the first one worked.
var (
	opEnqueue     = op{name: "Enqueue", repeatable: true}
	opClaim       = op{name: "Claim", repeatable: true}
	opClaimBatch  = op{name: "ClaimBatch", repeatable: true}
	opHeartbeat   = op{name: "Heartbeat", repeatable: true}
	opSubmit      = op{name: "Submit", repeatable: true}
	opSubmitBatch = op{name: "SubmitBatch", repeatable: true}
	opNack        = op{name: "Nack"}
	opCancel      = op{name: "Cancel", repeatable: true}
	opGetTask     = op{name: "GetTask", repeatable: true}
	opGetStale    = op{name: "GetTask", repeatable: true, anyNode: true}
	opWaitResult  = op{name: "WaitResult", repeatable: true}
	opStats       = op{name: "Stats", repeatable: true}
	opListDead    = op{name: "ListDead", repeatable: true}
	opRequeueDead = op{name: "RequeueDead"}
	opStatus      = op{name: "Status", repeatable: true}
	opTransfer    = op{name: "TransferLeadership"}
	opRemove      = op{name: "RemoveServer"}
)

// Enqueue adds tasks and returns one result per task, in order. A result
// code of CODE_DUPLICATE means the caller's idempotency key matched an
// existing task, whose id the result carries; ItemError maps the others.
//
// Every task without an idempotency key gets a fresh one here (a UUIDv7,
// which sorts by time), before the first attempt, and keeps it: the client's
// own retries (and a caller that retries with the same *NewTask values)
// cannot enqueue a task twice. Note
// that this sets IdempotencyKey on the caller's messages. A duplicate
// answered for a key minted by this call can only be an earlier attempt of
// the same call, so it is reported as CODE_OK.
func (c *Client) Enqueue(ctx context.Context, tasks ...*docketv1.NewTask) ([]*docketv1.ItemResult, error) {
	if len(tasks) == 0 {
		return nil, nil
	}
	minted := make([]bool, len(tasks))
	for i, t := range tasks {
		if t == nil {
			return nil, fmt.Errorf("Enqueue: %w: field tasks[%d]: nil task", ErrInvalidArgument, i)
		}
		if t.IdempotencyKey == "" {
			t.IdempotencyKey = newKey()
			minted[i] = true
		}
	}
	var items []*docketv1.ItemResult
	var err error
	if c.enq != nil && !hasDeps(tasks) {
		items, err = c.enq.do(ctx, tasks)
	} else {
		items, err = c.enqueueRPC(ctx, tasks)
	}
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		if minted[i] && it.GetCode() == docketv1.Code_CODE_DUPLICATE {
			it.Code = docketv1.Code_CODE_OK
		}
	}
	return items, nil
}

// enqueueRPC sends one Enqueue request, with the client's retries, and
// returns one result per task.
func (c *Client) enqueueRPC(ctx context.Context, tasks []*docketv1.NewTask) ([]*docketv1.ItemResult, error) {
	req := &docketv1.EnqueueRequest{Tasks: tasks}
	var resp *docketv1.EnqueueResponse
	_, err := c.invoke(ctx, opEnqueue, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).Enqueue(ctx, req, opts...)
		resp = r
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.GetItems()) != len(tasks) {
		return nil, fmt.Errorf("Enqueue: server answered %d items for %d tasks", len(resp.GetItems()), len(tasks))
	}
	return resp.GetItems(), nil
}

// EnqueueOne adds one task and returns its id. An idempotency key that
// matches an existing task returns that task's id and no error.
func (c *Client) EnqueueOne(ctx context.Context, queue string, payload []byte, opts ...TaskOption) (string, error) {
	t := &docketv1.NewTask{Queue: queue, Payload: payload}
	for _, o := range opts {
		o(t)
	}
	items, err := c.Enqueue(ctx, t)
	if err != nil {
		return "", err
	}
	if err := ItemError(items[0]); err != nil {
		return "", fmt.Errorf("Enqueue: %w", err)
	}
	return items[0].GetTaskId(), nil
}

// Heartbeat extends the leases of running tasks, all in one command. The
// results come one per item, in order: CODE_STALE_FENCE or CODE_NOT_FOUND
// means that lease is lost. With shared RPCs on (WithSharedRPCs),
// concurrent Heartbeats share one Heartbeat RPC, and each caller gets the
// results of its own items.
func (c *Client) Heartbeat(ctx context.Context, items ...*docketv1.HeartbeatItem) ([]*docketv1.ItemResult, error) {
	if len(items) == 0 {
		return nil, nil
	}
	if c.hb != nil {
		return c.hb.do(ctx, items)
	}
	return c.heartbeatRPC(ctx, items)
}

// heartbeatRPC sends one Heartbeat RPC of items, with the client's
// retries: what a caller alone sends, and what callers that share send.
func (c *Client) heartbeatRPC(ctx context.Context, items []*docketv1.HeartbeatItem) ([]*docketv1.ItemResult, error) {
	req := &docketv1.HeartbeatRequest{Items: items}
	var resp *docketv1.HeartbeatResponse
	_, err := c.invoke(ctx, opHeartbeat, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).Heartbeat(ctx, req, opts...)
		resp = r
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.GetItems()) != len(items) {
		return nil, fmt.Errorf("Heartbeat: server answered %d items for %d", len(resp.GetItems()), len(items))
	}
	hideStale(resp.GetItems())
	return resp.GetItems(), nil
}

// Submit finishes a task with an outcome, under the fence of its claim.
// alreadyDone is true when the same Submit was accepted before (the client
// retried after an unknown outcome, or the caller did): the task is done
// either way. ErrStaleFence means the lease was lost and the Submit was not
// accepted. ErrCancelled means an operator cancelled the task while this
// claim ran: it ended CANCELLED and nothing of the Submit was stored.
func (c *Client) Submit(ctx context.Context, req *docketv1.SubmitRequest) (alreadyDone bool, err error) {
	r := c.submitRiding(ctx, req, nil)
	return r.alreadyDone, r.err
}

// SubmitBatch reports many tasks in one call and returns one result per
// item, in order: CODE_OK, CODE_ALREADY_DONE, or a code that ItemError
// maps (ErrStaleFence, ErrNotFound, ErrWrongState, ErrCancelled). An invalid item fails
// the whole call with ErrInvalidArgument. Like Submit it is retried after
// ErrOutcomeUnknown: each item is fenced.
func (c *Client) SubmitBatch(ctx context.Context, reqs ...*docketv1.SubmitRequest) ([]*docketv1.ItemResult, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	var resp *docketv1.SubmitBatchResponse
	_, err := c.invoke(ctx, opSubmitBatch, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).SubmitBatch(ctx, &docketv1.SubmitBatchRequest{Items: reqs}, opts...)
		resp = r
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.GetItems()) != len(reqs) {
		return nil, fmt.Errorf("SubmitBatch: server answered %d items for %d", len(resp.GetItems()), len(reqs))
	}
	hideStale(resp.GetItems())
	return resp.GetItems(), nil
}

// Nack gives a claimed task back for another attempt after req.DelayNs and
// returns its new state (DEAD when it ran out of attempts). It is not
// retried after a lost leadership: such an error wraps ErrOutcomeUnknown,
// and the task is then either requeued or still running until its lease
// expires, which ends the same way.
func (c *Client) Nack(ctx context.Context, req *docketv1.NackRequest) (docketv1.TaskState, error) {
	var resp *docketv1.NackResponse
	_, err := c.invoke(ctx, opNack, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).Nack(ctx, req, opts...)
		resp = r
		return err
	})
	if err != nil {
		return docketv1.TaskState_TASK_STATE_UNSPECIFIED, err
	}
	return resp.GetState(), nil
}

// Cancel cancels a task, as CancelTask does, without saying how.
//
// Deprecated: use CancelTask, which also says whether the task was
// running (a request) or waiting (cancelled now).
func (c *Client) Cancel(ctx context.Context, taskID string) error {
	_, err := c.CancelTask(ctx, taskID) // cancel.go
	return err
}

// ReadTask reads a task, linearizably: the answer reflects every write
// acknowledged before the call. It needs a leader.
func (c *Client) ReadTask(ctx context.Context, taskID string) (*docketv1.Task, error) {
	return c.readTask(ctx, taskID, false)
}

// ReadTaskStale reads a task from any node's local replica, which may lag
// the leader but answers without one: for dashboards and for looking
// around while the cluster has no leader.
func (c *Client) ReadTaskStale(ctx context.Context, taskID string) (*docketv1.Task, error) {
	return c.readTask(ctx, taskID, true)
}

// GetTask reads a task: ReadTaskStale with allowStale, else ReadTask.
//
// Deprecated: use Get or GetStale (a TaskInfo in Go types), or ReadTask
// or ReadTaskStale (the wire record), which say which read they are where
// they are called.
func (c *Client) GetTask(ctx context.Context, taskID string, allowStale bool) (*docketv1.Task, error) {
	return c.readTask(ctx, taskID, allowStale)
}

func (c *Client) readTask(ctx context.Context, taskID string, allowStale bool) (*docketv1.Task, error) {
	o := opGetTask
	if allowStale {
		o = opGetStale
	}
	req := &docketv1.GetTaskRequest{TaskId: taskID, AllowStale: allowStale, Tenant: c.cfg.tenant}
	var resp *docketv1.GetTaskResponse
	_, err := c.invoke(ctx, o, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).GetTask(ctx, req, opts...)
		resp = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.GetTask(), nil
}

// WaitResult waits until the task is finished (completed, failed, dead or
// cancelled) and returns it. It long-polls in rounds of at most MaxWait
// until ctx ends, when it returns an error wrapping ctx's error.
func (c *Client) WaitResult(ctx context.Context, taskID string) (*docketv1.Task, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("WaitResult %s: %w", taskID, err)
		}
		var resp *docketv1.WaitResultResponse
		var waited time.Duration
		waitFor := func(ctx context.Context) time.Duration {
			waited = clampWait(ctx, MaxWait)
			return waited
		}
		_, err := c.invokeWait(ctx, opWaitResult, waitFor, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
			r, err := docketv1.NewQueueClient(cc).WaitResult(ctx, &docketv1.WaitResultRequest{TaskId: taskID, WaitNs: int64(waited), Tenant: c.cfg.tenant}, opts...)
			resp = r
			return err
		})
		if err != nil {
			return nil, err
		}
		if resp.GetDone() {
			return resp.GetTask(), nil
		}
		if waited <= 0 {
			// Too little time left for another round: waiting it out would
			// only end in the same deadline error.
			<-ctx.Done()
		}
	}
}

// Stats counts tasks by state for a queue and tenant; empty means all.
// The server answers at most 4 MiB of queues at a time; Stats follows its
// cursor until every matching queue is listed (each page is read at its
// own moment, so counts of different pages may be of different times).
func (c *Client) Stats(ctx context.Context, queue, tenant string) ([]*docketv1.QueueStats, error) {
	req := &docketv1.StatsRequest{Queue: queue, Tenant: tenant}
	var out []*docketv1.QueueStats
	for {
		var resp *docketv1.StatsResponse
		_, err := c.invoke(ctx, opStats, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
			r, err := docketv1.NewQueueClient(cc).Stats(ctx, req, opts...)
			resp = r
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, resp.GetQueues()...)
		if resp.GetNextCursor() == "" || resp.GetNextCursor() == req.Cursor {
			return out, nil
		}
		req.Cursor = resp.GetNextCursor()
	}
}

// ListDead pages through the dead letters of a queue and tenant; pass the
// returned NextCursor back in req.Cursor for the next page.
func (c *Client) ListDead(ctx context.Context, req *docketv1.ListDeadRequest) (*docketv1.ListDeadResponse, error) {
	var resp *docketv1.ListDeadResponse
	_, err := c.invoke(ctx, opListDead, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).ListDead(ctx, req, opts...)
		resp = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// RequeueDead puts dead letters back to pending: one task by id, or up to
// req.Limit of a queue and tenant. It is not retried after a lost
// leadership (ErrOutcomeUnknown): with a limit, a second round would
// requeue more tasks than asked.
func (c *Client) RequeueDead(ctx context.Context, req *docketv1.RequeueDeadRequest) ([]*docketv1.ItemResult, error) {
	var resp *docketv1.RequeueDeadResponse
	_, err := c.invoke(ctx, opRequeueDead, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).RequeueDead(ctx, req, opts...)
		resp = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.GetItems(), nil
}

// Status returns the cluster status as the leader sees it (or, with no
// leader, as some node sees it), without the keyspace hash: that reads
// every key and is only comparable per node (see NodeStatus). The client
// learns nodes from the answer.
func (c *Client) Status(ctx context.Context) (*docketv1.StatusResponse, error) {
	req := &docketv1.StatusRequest{}
	var resp *docketv1.StatusResponse
	_, err := c.invoke(ctx, opStatus, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewClusterClient(cc).Status(ctx, req, opts...)
		resp = r
		return err
	})
	if err != nil {
		return nil, err
	}
	c.learnStatus(resp)
	return resp, nil
}

// NodeStatus asks the node at addr, and only it, for its own view of the
// cluster, in one attempt: an operator or a checker comparing nodes (their
// applied indexes and keyspace hashes) needs each node's answer, not the
// leader's. withHash asks for the keyspace hash, which reads every key.
func (c *Client) NodeStatus(ctx context.Context, addr string, withHash bool) (*docketv1.StatusResponse, error) {
	cc, err := c.conn(addr)
	if err != nil {
		return nil, fmt.Errorf("NodeStatus %s: %w", addr, err)
	}
	resp, err := docketv1.NewClusterClient(cc).Status(ctx, &docketv1.StatusRequest{WithHash: withHash})
	if err != nil {
		return nil, fmt.Errorf("NodeStatus %s: %w", addr, mapError(err))
	}
	return resp, nil
}

// TransferLeadership asks the leader to hand over to the server with raft
// id toID (empty: the leader picks) and returns the new leader's id. The
// client forgets the old leader and follows the new one on the next call.
func (c *Client) TransferLeadership(ctx context.Context, toID string) (string, error) {
	var resp *docketv1.TransferLeadershipResponse
	var addr string
	_, err := c.invoke(ctx, opTransfer, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		addr = cc.Target()
		r, err := docketv1.NewClusterClient(cc).TransferLeadership(ctx, &docketv1.TransferLeadershipRequest{ToId: toID}, opts...)
		resp = r
		return err
	})
	if err != nil {
		return "", err
	}
	c.forgetLeader(addr)
	return resp.GetLeaderId(), nil
}

// RemoveServer takes a server out of the Raft configuration, on the
// leader: how an operator retires a dead node, or removes a damaged one
// before wiping its data dir and starting it again with --join (a wiped
// voter that came back under its old id without this has forgotten its
// vote). It is not retried on an unknown outcome: a second call for the
// same id would fail with the server unknown.
func (c *Client) RemoveServer(ctx context.Context, id string) error {
	_, err := c.invoke(ctx, opRemove, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		_, err := docketv1.NewClusterClient(cc).RemoveServer(ctx, &docketv1.RemoveServerRequest{Id: id}, opts...)
		return err
	})
	return err
}

// Leave asks the node at addr, and only it, to leave the cluster for good
// (docket cluster leave): it hands leadership over if it leads, leaves
// the configuration and gossip, and its agent stops. One attempt: a
// second call to a node that left finds nothing there.
func (c *Client) Leave(ctx context.Context, addr string) error {
	cc, err := c.conn(addr)
	if err != nil {
		return fmt.Errorf("Leave %s: %w", addr, err)
	}
	if _, err := docketv1.NewClusterClient(cc).Leave(ctx, &docketv1.LeaveRequest{}); err != nil {
		return fmt.Errorf("Leave %s: %w", addr, mapError(err))
	}
	return nil
}

// CreateToken mints a token on the leader (admin over every tenant). The
// answer's secret is shown once: the cluster keeps only its hash.
func (c *Client) CreateToken(ctx context.Context, req *docketv1.CreateTokenRequest) (*docketv1.CreateTokenResponse, error) {
	var out *docketv1.CreateTokenResponse
	_, err := c.invoke(ctx, op{name: "create token"}, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewClusterClient(cc).CreateToken(ctx, req, opts...)
		out = r
		return err
	})
	return out, err
}

// ListTokens lists the cluster's tokens: accessors, names, roles, tenants
// and expiry, never secrets or hashes.
func (c *Client) ListTokens(ctx context.Context) ([]*docketv1.TokenInfo, error) {
	var out []*docketv1.TokenInfo
	_, err := c.invoke(ctx, op{name: "list tokens", repeatable: true}, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewClusterClient(cc).ListTokens(ctx, &docketv1.ListTokensRequest{}, opts...)
		out = r.GetTokens()
		return err
	})
	return out, err
}

// RevokeToken deletes a token by its accessor; every node refuses it once
// it applied the revoke. ErrNotFound when there is no such token.
func (c *Client) RevokeToken(ctx context.Context, accessor string) error {
	_, err := c.invoke(ctx, op{name: "revoke token"}, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		_, err := docketv1.NewClusterClient(cc).RevokeToken(ctx, &docketv1.RevokeTokenRequest{Accessor: accessor}, opts...)
		return err
	})
	return err
}
