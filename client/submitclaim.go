package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/dockethq/docket/proto/docketv1"
)

// SubmitAndClaim reports tasks as SubmitBatch does and, in the same Raft
// entry, claims up to claim.MaxTasks more from claim.Queue: a worker that
// drains a backlog waits for one replicated round per step instead of two
// (a SubmitBatch, then a Claim). The claim runs after the submits, so it
// sees the room they free under a queue's limits.
//
// It does not wait: claim.WaitNs must be 0. No tasks means the leader had
// none to give at once, or that the server predates this call (it then
// answers the submits alone); either way the worker goes on with Claim,
// which may wait. The items are SubmitBatch's; an error means, as there,
// that none of them is known to have been accepted, and the call is retried
// after ErrOutcomeUnknown as Claim is: tasks claimed for an attempt whose
// answer was lost wait out their lease, or are put back when the server
// sees the caller gone.
func (c *Client) SubmitAndClaim(ctx context.Context, claim *docketv1.ClaimRequest, reqs ...*docketv1.SubmitRequest) ([]*docketv1.ItemResult, []*docketv1.Task, error) {
	if claim == nil {
		return nil, nil, fmt.Errorf("SubmitAndClaim: %w: nil claim", ErrInvalidArgument)
	}
	if len(reqs) == 0 {
		return nil, nil, fmt.Errorf("SubmitAndClaim: %w: no submits (use Claim)", ErrInvalidArgument)
	}
	var resp *docketv1.SubmitBatchResponse
	_, err := c.invoke(ctx, opSubmitBatch, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).SubmitBatch(ctx, &docketv1.SubmitBatchRequest{Items: reqs, Claim: claim}, opts...)
		resp = r
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if len(resp.GetItems()) != len(reqs) {
		return nil, nil, fmt.Errorf("SubmitAndClaim: server answered %d items for %d", len(resp.GetItems()), len(reqs))
	}
	hideStale(resp.GetItems())
	return resp.GetItems(), resp.GetTasks(), nil
}
