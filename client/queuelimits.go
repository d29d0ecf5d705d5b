package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/dockethq/docket/proto/docketv1"
)

// Limits set a state, so a SetQueueLimits sent again after
// ErrOutcomeUnknown is harmless (the second answer may say unchanged).
var opSetQueueLimits = op{name: "SetQueueLimits", repeatable: true}

// QueueLimits are the limits SetQueueLimits changes. A nil field keeps the
// queue's value; 0 clears that limit.
type QueueLimits struct {
	// MaxRunning bounds the queue's RUNNING tasks: a claim takes at most
	// MaxRunning - running, maybe none.
	MaxRunning *uint32
	// RateMilli bounds claims to RateMilli/1000 tasks a second (a token
	// bucket); Burst is the bucket's size, 0 meaning the rate's tasks per
	// second (at least 1). Changing either refills the bucket.
	RateMilli *uint64
	Burst     *uint32

	// Fair queues (feature level 16; fairqueues.go says what each does).
	// MaxRunningPerKey bounds the RUNNING tasks of one key (SetKeyLimit
	// overrides it per key); Order is OrderFIFO or OrderFair; PerKeyPending
	// with PerKeyPendingDepth D keeps a key's D newest or oldest pending
	// tasks and cancels the others (reason "debounced").
	MaxRunningPerKey   *uint32
	Order              *docketv1.QueueOrder
	PerKeyPending      *docketv1.PerKeyPending
	PerKeyPendingDepth *uint32
}

// SetQueueLimits sets or clears the concurrency and rate limits of one
// queue of tenant ("" is the default tenant). A claim the limits leave
// empty answers empty, and a long poll waits until a running task ends or
// a token is due. changed is false when every given value was already so.
// It needs admin over the tenant and feature level 10
// (ErrFeatureDisabled).
func (c *Client) SetQueueLimits(ctx context.Context, queue, tenant string, l QueueLimits) (changed bool, err error) {
	return c.setLimits(ctx, &docketv1.SetQueueLimitsRequest{Queue: queue, Tenant: tenant,
		MaxRunning: l.MaxRunning, RateMilli: l.RateMilli, Burst: l.Burst,
		MaxRunningPerKey: l.MaxRunningPerKey, Order: l.Order, PerKeyPending: l.PerKeyPending, PerKeyPendingDepth: l.PerKeyPendingDepth})
}

// SetTenantLimit sets (0 clears) tenant's concurrency limit: its RUNNING
// tasks across all its queues. It needs admin over every tenant, since it
// bounds what the tenant may take from the cluster.
func (c *Client) SetTenantLimit(ctx context.Context, tenant string, maxRunning uint32) (changed bool, err error) {
	return c.setLimits(ctx, &docketv1.SetQueueLimitsRequest{Tenant: tenant, MaxRunning: &maxRunning})
}

func (c *Client) setLimits(ctx context.Context, req *docketv1.SetQueueLimitsRequest) (changed bool, err error) {
	_, err = c.invoke(ctx, opSetQueueLimits, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).SetQueueLimits(ctx, req, opts...)
		changed = r.GetChanged()
		return err
	})
	return changed, err
}
