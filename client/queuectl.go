package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/dockethq/docket/proto/docketv1"
)

// Queue control. Pause and resume set a state, so sending them again
// after ErrOutcomeUnknown is harmless (the second answer may then say
// unchanged). A repeated purge only deletes what the first left, so it
// is retried too; its count then misses what the lost attempt deleted.
var (
	opPauseQueue  = op{name: "PauseQueue", repeatable: true}
	opResumeQueue = op{name: "ResumeQueue", repeatable: true}
	opPurgeQueue  = op{name: "PurgeQueue", repeatable: true}
)

// PauseQueue stops claims of one queue of tenant ("" is the default
// tenant): Claim takes nothing from it, and a long poll waits, until
// ResumeQueue. Enqueues and running tasks go on. changed is false when it
// was paused already. It needs admin over the tenant and a cluster whose
// every server runs a build with feature level 7 (ErrFeatureDisabled).
func (c *Client) PauseQueue(ctx context.Context, queue, tenant string) (changed bool, err error) {
	req := &docketv1.PauseQueueRequest{Queue: queue, Tenant: tenant}
	_, err = c.invoke(ctx, opPauseQueue, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).PauseQueue(ctx, req, opts...)
		changed = r.GetChanged()
		return err
	})
	return changed, err
}

// ResumeQueue lets claims of a paused queue take tasks again; changed is
// false when it was not paused.
func (c *Client) ResumeQueue(ctx context.Context, queue, tenant string) (changed bool, err error) {
	req := &docketv1.ResumeQueueRequest{Queue: queue, Tenant: tenant}
	_, err = c.invoke(ctx, opResumeQueue, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).ResumeQueue(ctx, req, opts...)
		changed = r.GetChanged()
		return err
	})
	return changed, err
}

// PurgeQueued deletes a queue's pending and delayed tasks and returns how
// many it deleted. Running, waiting, finished and dead tasks stay. Tasks
// enqueued while it runs may be deleted too.
func (c *Client) PurgeQueued(ctx context.Context, queue, tenant string) (uint64, error) {
	return c.purge(ctx, queue, tenant, false)
}

// PurgeDead deletes a queue's dead letters and returns how many it
// deleted.
func (c *Client) PurgeDead(ctx context.Context, queue, tenant string) (uint64, error) {
	return c.purge(ctx, queue, tenant, true)
}

// PurgeQueue is PurgeDead with dead, else PurgeQueued.
//
// Deprecated: use PurgeQueued or PurgeDead, which say what they delete
// where they are called.
func (c *Client) PurgeQueue(ctx context.Context, queue, tenant string, dead bool) (uint64, error) {
	return c.purge(ctx, queue, tenant, dead)
}

func (c *Client) purge(ctx context.Context, queue, tenant string, dead bool) (uint64, error) {
	req := &docketv1.PurgeQueueRequest{Queue: queue, Tenant: tenant, Dead: dead}
	var purged uint64
	_, err := c.invoke(ctx, opPurgeQueue, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).PurgeQueue(ctx, req, opts...)
		purged = r.GetPurged()
		return err
	})
	return purged, err
}

// Queues lists every queue the caller may see, across tenants (a token
// scoped to some tenants sees theirs only), with its counts and whether
// it is paused: Stats of every queue and tenant.
func (c *Client) Queues(ctx context.Context) ([]*docketv1.QueueStats, error) {
	return c.Stats(ctx, "", "")
}
