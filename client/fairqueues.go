package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/dockethq/docket/proto/docketv1"
)

// Fair queues (feature level 16; an older cluster answers
// ErrFeatureDisabled). A task's key is its unit of fairness, usually the
// end customer it works for; a task without one is its own key. A queue
// configured with SetQueueLimits can:
//   - bound the RUNNING tasks of each key (MaxRunningPerKey; SetKeyLimit
//     overrides it for one key);
//   - claim in fair order (OrderFair): priority first, then among the
//     keys with ready tasks the one with the fewest running per weight,
//     ties to the key served longest ago, FIFO within a key. With K keys
//     holding ready tasks, a quiet key's next task is claimed within
//     about K claims of becoming ready, however long a noisy key's
//     backlog is;
//   - debounce (PerKeyPending with a depth D): a key keeps its D newest
//     or oldest pending tasks, and the others end CANCELLED with reason
//     "debounced".
// The FSM applies every rule, so they hold across leader changes.

// The queue orders and debounce rules, for QueueLimits.
const (
	OrderFIFO = docketv1.QueueOrder_QUEUE_ORDER_FIFO
	OrderFair = docketv1.QueueOrder_QUEUE_ORDER_FAIR

	KeepAllPending    = docketv1.PerKeyPending_PER_KEY_PENDING_ALL
	KeepNewestPending = docketv1.PerKeyPending_PER_KEY_PENDING_KEEP_NEWEST
	KeepOldestPending = docketv1.PerKeyPending_PER_KEY_PENDING_KEEP_OLDEST
)

// TaskKey sets the task's key, its unit of fairness (usually the end
// customer it works for): at most 256 bytes. Empty means none.
func TaskKey(key string) TaskOption {
	return func(t *docketv1.NewTask) { t.Key = []byte(key) }
}

// Key returns the task's key (TaskKey); empty when it has none.
func (t *Task) Key() string { return string(t.p.GetKey()) }

// KeyLimit is what SetKeyLimit changes of one key. A nil field keeps the
// key's value; 0 clears it (the queue's MaxRunningPerKey, weight 1).
type KeyLimit struct {
	// MaxRunning bounds the key's RUNNING tasks instead of the queue's
	// MaxRunningPerKey: a premium customer may get 10 where others get 1.
	MaxRunning *uint32
	// Weight is the key's share of the fair order: a key of weight 2 runs
	// about twice the tasks of a key of weight 1 while both have a
	// backlog. At most 1000.
	Weight *uint32
}

// Key limits set a state, so a SetKeyLimit sent again after
// ErrOutcomeUnknown is harmless (the second answer may say unchanged);
// ListKeys is a read.
var (
	opSetKeyLimit = op{name: "SetKeyLimit", repeatable: true}
	opListKeys    = op{name: "ListKeys", repeatable: true}
)

// SetKeyLimit overrides the per-key limit and weight of one key of a queue
// of tenant ("" is the default tenant). changed is false when every given
// value was already so. It needs admin over the tenant and feature level
// 16 (ErrFeatureDisabled).
func (c *Client) SetKeyLimit(ctx context.Context, queue, tenant, key string, l KeyLimit) (changed bool, err error) {
	req := &docketv1.SetKeyLimitRequest{Queue: queue, Tenant: tenant, Key: []byte(key), MaxRunning: l.MaxRunning, Weight: l.Weight}
	_, err = c.invoke(ctx, opSetKeyLimit, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).SetKeyLimit(ctx, req, opts...)
		changed = r.GetChanged()
		return err
	})
	return changed, err
}

// ListKeys lists the top keys of a queue of tenant ("" is the default
// tenant) by backlog and by running, up to limit of each (0: 20, at most
// 1000), with the number of active keys; Keyed is false for a queue
// without a per-key rule. It is linearizable; reader or admin.
func (c *Client) ListKeys(ctx context.Context, queue, tenant string, limit uint32) (*docketv1.ListKeysResponse, error) {
	req := &docketv1.ListKeysRequest{Queue: queue, Tenant: tenant, Limit: limit}
	var resp *docketv1.ListKeysResponse
	_, err := c.invoke(ctx, opListKeys, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).ListKeys(ctx, req, opts...)
		resp = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
