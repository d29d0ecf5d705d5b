package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Claim sharing. Concurrent Claims of one Client share ClaimBatch RPCs
// through a sharer (coalesce.go), as Enqueues and Submits share theirs:
// each caller keeps its own worker id, lease and max_tasks, and gets
// exactly the tasks claimed for it. The server runs each item as its
// ordinary Claim, folded with the others into shared Raft entries.
//
// A long poll may wait up to 30 s, and a shared RPC holds one of the
// sharer's few slots until it answers: waiting in one would stall every
// other claimer of the Client. So ClaimBatch never waits. A Claim with a
// wait, while other Claims are under way, rides the sharer without one;
// only if that found nothing does the caller long-poll for the rest of its
// wait, on its own Claim RPC, outside the sharer. A long poll with no other
// Claim under way has nobody to share with and goes out at once as one
// Claim RPC. While such a poll waits it counts as a Claim under way, so a
// second poller then pays a try that may share with nobody.

// Claim takes up to req.MaxTasks tasks under a lease of req.LeaseNs. With
// req.WaitNs > 0 the server holds the call until a task is claimable or the
// wait ends; the client shortens the wait to fit ctx's deadline, so that a
// long-poll that finds nothing returns no tasks rather than a deadline
// error. req is not modified.
//
// With shared RPCs on (WithSharedRPCs), concurrent Claims share ClaimBatch
// RPCs, and a long-poll among other claims first tries without a wait,
// with the others, then waits out the rest of its wait on its own RPC; a
// lone long-poll is one Claim RPC. A caller
// whose ctx ends while its shared RPC is out gets ErrOutcomeUnknown: tasks
// claimed for it wait for their lease to expire.
func (c *Client) Claim(ctx context.Context, req *docketv1.ClaimRequest) ([]*docketv1.Task, error) {
	if req == nil {
		return nil, fmt.Errorf("Claim: %w: nil request", ErrInvalidArgument)
	}
	if c.clm != nil {
		return c.claimShared(ctx, req)
	}
	return c.claimRPC(ctx, req, time.Duration(req.GetWaitNs()))
}

// claimRPC sends one Claim of req with a wait of wait, with the client's
// retries, and returns its tasks.
func (c *Client) claimRPC(ctx context.Context, req *docketv1.ClaimRequest, wait time.Duration) ([]*docketv1.Task, error) {
	var resp *docketv1.ClaimResponse
	var attemptWait time.Duration // this attempt's, set from the caller's ctx before it
	waitFor := func(ctx context.Context) time.Duration {
		attemptWait = clampWait(ctx, wait)
		return attemptWait
	}
	_, err := c.invokeWait(ctx, opClaim, waitFor, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).Claim(ctx, &docketv1.ClaimRequest{
			Queue:    req.GetQueue(),
			Tenant:   req.GetTenant(),
			WorkerId: req.GetWorkerId(),
			LeaseNs:  req.GetLeaseNs(),
			MaxTasks: req.GetMaxTasks(),
			WaitNs:   int64(attemptWait),
		}, opts...)
		resp = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.GetTasks(), nil
}

// clampWait shortens a long-poll wait to MaxWait and to ctx's deadline,
// leaving a tenth of the remaining time (at most a second) for the reply.
func clampWait(ctx context.Context, wait time.Duration) time.Duration {
	wait = min(wait, MaxWait)
	if dl, ok := ctx.Deadline(); ok {
		rem := time.Until(dl)
		rem -= min(rem/10, time.Second)
		wait = min(wait, rem)
	}
	return max(wait, 0)
}

// claimShared is Claim while sharing is on. A long poll with no other
// Claim under way has nobody to share with: it is sent as one Claim with
// its wait, not as a try and then a poll. It holds no sharer slot, and a
// claim that comes while it waits takes the sharer's path.
func (c *Client) claimShared(ctx context.Context, req *docketv1.ClaimRequest) ([]*docketv1.Task, error) {
	n := c.claiming.Add(1)
	defer c.claiming.Add(-1)
	if req.GetWaitNs() > 0 && n == 1 {
		return c.claimRPC(ctx, req, time.Duration(req.GetWaitNs()))
	}
	start := time.Now()
	out, err := c.clm.do(ctx, []*docketv1.ClaimRequest{withoutWait(req)})
	if err != nil {
		return nil, err
	}
	if len(out[0]) > 0 || req.GetWaitNs() <= 0 {
		return out[0], nil
	}
	left := time.Duration(req.GetWaitNs()) - time.Since(start)
	if clampWait(ctx, left) <= 0 {
		return nil, nil // no time left to wait: the try was the claim
	}
	return c.claimRPC(ctx, req, left)
}

// withoutWait is req as the sharer sends it: no wait, and a copy, since
// Claim does not modify the caller's request.
func withoutWait(req *docketv1.ClaimRequest) *docketv1.ClaimRequest {
	return &docketv1.ClaimRequest{
		Queue:    req.GetQueue(),
		Tenant:   req.GetTenant(),
		WorkerId: req.GetWorkerId(),
		LeaseNs:  req.GetLeaseNs(),
		MaxTasks: req.GetMaxTasks(),
	}
}

// claimWeight is what a claim counts against a shared RPC's bound: its
// max_tasks (0 asks the server's default, one), since the server bounds
// the sum of a ClaimBatch's max_tasks, not only its items.
func claimWeight(req *docketv1.ClaimRequest) int {
	return max(int(req.GetMaxTasks()), 1)
}

// claimAlone is a caller's claim sent on its own: today's Claim RPC. A
// Claim call carries exactly one request.
func (c *Client) claimAlone(ctx context.Context, reqs []*docketv1.ClaimRequest) ([][]*docketv1.Task, error) {
	tasks, err := c.claimRPC(ctx, reqs[0], 0)
	if err != nil {
		return nil, err
	}
	return [][]*docketv1.Task{tasks}, nil
}

// claimBatchRPC sends many callers' claims as one ClaimBatch, with the
// client's retries (a lost answer only leaves leases to expire), and
// returns each item's tasks, in order.
func (c *Client) claimBatchRPC(ctx context.Context, reqs []*docketv1.ClaimRequest) ([][]*docketv1.Task, error) {
	var resp *docketv1.ClaimBatchResponse
	_, err := c.invoke(ctx, opClaimBatch, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).ClaimBatch(ctx, &docketv1.ClaimBatchRequest{Items: reqs}, opts...)
		resp = r
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.GetItems()) != len(reqs) {
		return nil, fmt.Errorf("%s: server answered %d items for %d claims", opClaimBatch.name, len(resp.GetItems()), len(reqs))
	}
	out := make([][]*docketv1.Task, len(reqs))
	for i, it := range resp.GetItems() {
		out[i] = it.GetTasks()
	}
	return out, nil
}
