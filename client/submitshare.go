package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/proto/docketv1"
)

// submitItem is one Submit that a Client sends or shares, and the claim
// of one task that rides on it (a Worker's next task, SubmitAndClaim), or
// nil.
type submitItem struct {
	req  *docketv1.SubmitRequest
	ride *docketv1.ClaimRequest
}

// submitResult is one Submit's answer, and the task its ride claimed.
type submitResult struct {
	alreadyDone bool
	err         error
	next        *docketv1.Task
}

func submitItemSize(it submitItem) int {
	n := proto.Size(it.req)
	if it.ride != nil {
		n += proto.Size(it.ride)
	}
	return n
}

// submitRiding submits req, sharing a SubmitBatch with concurrent Submits
// when sharing is on, and with ride claims one task like it in the same
// call: result.next, or nil when the leader had none at once, the server
// predates the claim, or the ride could not go.
func (c *Client) submitRiding(ctx context.Context, req *docketv1.SubmitRequest, ride *docketv1.ClaimRequest) submitResult {
	it := submitItem{req: req, ride: ride}
	if c.sub == nil {
		out, err := c.submitAlone(ctx, []submitItem{it})
		if err != nil {
			return submitResult{err: err}
		}
		return out[0]
	}
	out, err := c.sub.do(ctx, []submitItem{it})
	if err != nil {
		return submitResult{err: err}
	}
	return out[0]
}

// submitOne sends one Submit RPC, with the client's retries.
func (c *Client) submitOne(ctx context.Context, req *docketv1.SubmitRequest) (bool, error) {
	var resp *docketv1.SubmitResponse
	_, err := c.invoke(ctx, opSubmit, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).Submit(ctx, req, opts...)
		resp = r
		return err
	})
	if err != nil {
		return false, err
	}
	return resp.GetAlreadyDone(), nil
}

// submitAlone sends a caller's Submit on its own: what a Submit that
// shares nothing gets. A Submit call carries exactly one item. With a
// ride it is a SubmitBatch that claims; if the server refuses that call
// for any reason but an unknown outcome, the Submit goes again alone,
// without the ride: the claim's refusal must not fail a report whose
// task the worker finished (a repeat of an applied Submit answers
// ALREADY_DONE).
func (c *Client) submitAlone(ctx context.Context, items []submitItem) ([]submitResult, error) {
	it := items[0]
	if it.ride != nil {
		ride := proto.Clone(it.ride).(*docketv1.ClaimRequest)
		ride.MaxTasks = 1
		got, next, err := c.SubmitAndClaim(ctx, ride, it.req)
		if err == nil {
			out := answerSubmits(got)
			if len(next) > 0 {
				out[0].next = next[0]
			}
			return out, nil
		}
		if errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrClosed) || ctx.Err() != nil {
			return nil, err
		}
	}
	done, err := c.submitOne(ctx, it.req)
	if err != nil {
		return nil, err
	}
	return []submitResult{{alreadyDone: done}}, nil
}

// submitBatchRPC sends many callers' Submits as one SubmitBatch and turns
// each item's answer into what its own Submit would have returned. The
// rides that ask for the same claim as the first one (queue, tenant,
// worker, lease) become the batch's claim, of one task each, and the
// tasks go to them in order; a ride unlike the first gets none.
func (c *Client) submitBatchRPC(ctx context.Context, items []submitItem) ([]submitResult, error) {
	reqs := make([]*docketv1.SubmitRequest, len(items))
	var ride *docketv1.ClaimRequest
	var riders []int
	for i, it := range items {
		reqs[i] = it.req
		if it.ride == nil {
			continue
		}
		if ride == nil {
			ride = proto.Clone(it.ride).(*docketv1.ClaimRequest)
		} else if !sameClaim(ride, it.ride) {
			continue
		}
		riders = append(riders, i)
	}
	var got []*docketv1.ItemResult
	var next []*docketv1.Task
	var err error
	if ride != nil {
		ride.MaxTasks = uint32(len(riders))
		got, next, err = c.SubmitAndClaim(ctx, ride, reqs...)
	} else {
		got, err = c.SubmitBatch(ctx, reqs...)
	}
	if err != nil {
		return nil, err
	}
	out := answerSubmits(got)
	for k, t := range next {
		if k < len(riders) {
			out[riders[k]].next = t
		}
	}
	return out, nil
}

// answerSubmits turns SubmitBatch's items into what each Submit would
// have returned.
func answerSubmits(items []*docketv1.ItemResult) []submitResult {
	out := make([]submitResult, len(items))
	for i, it := range items {
		out[i].alreadyDone = it.GetCode() == docketv1.Code_CODE_ALREADY_DONE
		if err := ItemError(it); err != nil {
			out[i].err = fmt.Errorf("%s: %w", opSubmit.name, err)
		}
	}
	return out
}

// sameClaim reports whether two rides ask for tasks the same way.
func sameClaim(a, b *docketv1.ClaimRequest) bool {
	return a.GetQueue() == b.GetQueue() && a.GetTenant() == b.GetTenant() &&
		a.GetWorkerId() == b.GetWorkerId() && a.GetLeaseNs() == b.GetLeaseNs()
}
