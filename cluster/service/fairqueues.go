package service

import (
	"context"
	"fmt"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Fair queues (feature level 16). The FSM owns the rules: a task's key,
// the per-key limit, the fair order and debounce are applied there
// (fsm/keyed.go), and it keeps the per-key state a claim reads. This side
// builds the two commands and the read, and checks at the edge the bounds
// a caller can get wrong, so that a bad value costs no Raft entry and
// names its field. The level gate is apply's (s.apply: fsm.CommandLevel
// counts a task's key and the per-key fields of SetQueueLimits), so a
// cluster that has not latched level 16 refuses with ErrFeatureDisabled
// before anything is proposed.

// Edge bounds of the fair queues' values: the FSM's own, checked here too
// so that an obviously bad request costs no Raft entry. The FSM judges
// every command again at apply.
const (
	// MaxTaskKeyLen bounds a task's key (NewTask.key, SetKeyLimit's key):
	// an end customer's id, not a payload.
	MaxTaskKeyLen = fsm.MaxKeyBytes
	// MaxPerKeyPendingDepth bounds a debounced queue's depth: how many
	// pending tasks of one key it keeps.
	MaxPerKeyPendingDepth = fsm.MaxPerKeyDepth
	// MaxKeyWeight bounds a key's fair-order weight.
	MaxKeyWeight = fsm.MaxKeyWeight
)

// QueueLimitsCommand builds the SetQueueLimits of req, every optional
// field passed through as given: nil keeps the value, 0 clears it. An
// empty tenant is the default tenant.
func QueueLimitsCommand(req *pb.SetQueueLimitsRequest) *pb.Command {
	tenant := req.GetTenant()
	if tenant == "" {
		tenant = pb.DefaultTenant
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS, Body: &pb.Command_SetQueueLimits{
		SetQueueLimits: &pb.SetQueueLimitsCmd{Queue: req.GetQueue(), Tenant: tenant,
			MaxRunning: req.MaxRunning, RateMilli: req.RateMilli, Burst: req.Burst,
			MaxRunningPerKey: req.MaxRunningPerKey, Order: req.Order,
			PerKeyPending: req.PerKeyPending, PerKeyPendingDepth: req.PerKeyPendingDepth}}}
}

// SetKeyLimitCommand builds the override of one key's per-key limit and
// fair-order weight; an empty tenant is the default tenant. A nil value
// keeps the key's, 0 clears it.
func SetKeyLimitCommand(queue, tenant string, key []byte, maxRunning, weight *uint32) *pb.Command {
	if tenant == "" {
		tenant = pb.DefaultTenant
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_KEY_LIMIT, Body: &pb.Command_SetKeyLimit{
		SetKeyLimit: &pb.SetKeyLimitCmd{Queue: queue, Tenant: tenant, Key: key, MaxRunning: maxRunning, Weight: weight}}}
}

// CheckFairFields checks the fair-queue values of cmd at the edge: a
// task's key, the per-key fields of SetQueueLimits, and a SetKeyLimit. It
// returns nil for a command without any, and a *pb.FieldError naming the
// first bad field otherwise.
func CheckFairFields(cmd *pb.Command) error {
	switch cmd.GetType() {
	case pb.CommandType_COMMAND_TYPE_ENQUEUE:
		for i, t := range cmd.GetEnqueue().GetTasks() {
			if n := len(t.GetKey()); n > MaxTaskKeyLen {
				return (&pb.FieldError{Field: "key", Reason: fmt.Sprintf("%d bytes, more than %d", n, MaxTaskKeyLen)}).InList("tasks", i)
			}
		}
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS:
		return checkQueueFairness(cmd.GetSetQueueLimits())
	case pb.CommandType_COMMAND_TYPE_SET_KEY_LIMIT:
		return checkKeyLimit(cmd.GetSetKeyLimit())
	case pb.CommandType_COMMAND_TYPE_BATCH:
		for i, sub := range cmd.GetBatch().GetCommands() {
			if err := CheckFairFields(sub); err != nil {
				if fe, ok := err.(*pb.FieldError); ok {
					return fe.InList("items", i)
				}
				return err
			}
		}
	}
	return nil
}

// checkQueueFairness checks the per-key fields of a SetQueueLimits.
func checkQueueFairness(c *pb.SetQueueLimitsCmd) error {
	keyed := c.MaxRunningPerKey != nil || c.Order != nil || c.PerKeyPending != nil || c.PerKeyPendingDepth != nil
	if !keyed {
		return nil
	}
	if c.GetQueue() == "" {
		return &pb.FieldError{Field: "max_running_per_key", Reason: "per-key rules are a queue's; a tenant's own limit is a concurrency limit"}
	}
	if o := c.Order; o != nil && *o != pb.QueueOrder_QUEUE_ORDER_FIFO && *o != pb.QueueOrder_QUEUE_ORDER_FAIR {
		return &pb.FieldError{Field: "order", Reason: fmt.Sprintf("%d is neither FIFO nor FAIR", *o)}
	}
	keep := c.PerKeyPending != nil && *c.PerKeyPending != pb.PerKeyPending_PER_KEY_PENDING_ALL
	if p := c.PerKeyPending; p != nil && *p != pb.PerKeyPending_PER_KEY_PENDING_ALL &&
		*p != pb.PerKeyPending_PER_KEY_PENDING_KEEP_NEWEST && *p != pb.PerKeyPending_PER_KEY_PENDING_KEEP_OLDEST {
		return &pb.FieldError{Field: "per_key_pending", Reason: fmt.Sprintf("%d is not ALL, KEEP_NEWEST or KEEP_OLDEST", *p)}
	}
	if d := c.PerKeyPendingDepth; d != nil {
		switch {
		case *d > MaxPerKeyPendingDepth:
			return &pb.FieldError{Field: "per_key_pending_depth", Reason: fmt.Sprintf("%d over %d", *d, MaxPerKeyPendingDepth)}
		case *d == 0 && keep:
			// Keeping the newest zero would cancel every task enqueued.
			return &pb.FieldError{Field: "per_key_pending_depth", Reason: fmt.Sprintf("keep-newest and keep-oldest keep 1..%d tasks of a key", MaxPerKeyPendingDepth)}
		}
	} else if keep {
		// The depth has no default: a debounce that keeps an unstated
		// number of tasks is a surprise waiting to cancel work.
		return &pb.FieldError{Field: "per_key_pending_depth", Reason: "give the depth with keep-newest or keep-oldest"}
	}
	return nil
}

// checkKeyLimit checks a SetKeyLimit: its queue and tenant as names, one
// key, and at least one value.
func checkKeyLimit(c *pb.SetKeyLimitCmd) error {
	if err := checkQueueName(c.GetQueue(), c.GetTenant()); err != nil {
		return err
	}
	if n := len(c.GetKey()); n == 0 || n > MaxTaskKeyLen {
		return &pb.FieldError{Field: "key", Reason: fmt.Sprintf("length %d not in 1..%d (a task without a key is its own key, and has no override)", n, MaxTaskKeyLen)}
	}
	if c.MaxRunning == nil && c.Weight == nil {
		return &pb.FieldError{Field: "max_running", Reason: "give max_running or weight (0 clears it)"}
	}
	if w := c.GetWeight(); w > MaxKeyWeight {
		return &pb.FieldError{Field: "weight", Reason: fmt.Sprintf("%d over %d", w, MaxKeyWeight)}
	}
	return nil
}

// checkQueueName holds queue and tenant to the FSM's rule for names, by
// asking the FSM about a command that carries only them: one rule, one
// place, and the error names the field as the FSM's own would.
func checkQueueName(queue, tenant string) error {
	return fsm.Validate(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_PAUSED, Body: &pb.Command_SetQueuePaused{
		SetQueuePaused: &pb.SetQueuePausedCmd{Queue: queue, Tenant: tenant}}}, fsm.DefaultLimits())
}

// CheckListKeys fills a ListKeys request's default tenant and checks its
// queue, tenant and limit, so the node that receives it refuses a bad one.
func CheckListKeys(req *pb.ListKeysRequest) error {
	if req.GetTenant() == "" {
		req.Tenant = pb.DefaultTenant
	}
	if err := checkQueueName(req.GetQueue(), req.GetTenant()); err != nil {
		return err
	}
	if l := req.GetLimit(); l > fsm.MaxKeysLimit {
		return &pb.FieldError{Field: "limit", Reason: fmt.Sprintf("%d over %d", l, fsm.MaxKeysLimit)}
	}
	return nil
}

// Keys lists a keyed queue's top keys by backlog and by running (the
// FSM's Keys) at consistency c: up to req.limit of each (0: the FSM's
// default).
func (s *Service) Keys(ctx context.Context, req *pb.ListKeysRequest, c Consistency) (*pb.ListKeysResponse, error) {
	if err := CheckListKeys(req); err != nil {
		return nil, err
	}
	if err := s.readAt(ctx, c); err != nil {
		return nil, err
	}
	resp, err := s.r.FSM().Keys(req.GetQueue(), req.GetTenant(), int(req.GetLimit()))
	if err != nil {
		return nil, fmt.Errorf("keys of %s/%s: %w", req.GetQueue(), req.GetTenant(), err)
	}
	return resp, nil
}
