package service

import (
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Limits. The FSM enforces them at claim (fsm/rules_limits.go); this
// side only keeps long polls from proposing claims the limits would leave
// empty (claimable asks fsm.ClaimView), and wakes them when a limit
// may let them take a task: a running task of their queue ended (the
// Event names the queue), one of their tenant's ended under a tenant limit
// (Event.Freed, wakeTenant), or the rate limit's next token is due (their
// timer).

// SetQueueLimitsCommand builds the change of a queue's limits, or with an
// empty queue of tenant's concurrency limit; an empty tenant is the
// default tenant. A nil value keeps the limit, 0 clears it.
func SetQueueLimitsCommand(queue, tenant string, maxRunning *uint32, rateMilli *uint64, burst *uint32) *pb.Command {
	if tenant == "" {
		tenant = pb.DefaultTenant
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS, Body: &pb.Command_SetQueueLimits{
		SetQueueLimits: &pb.SetQueueLimitsCmd{Queue: queue, Tenant: tenant, MaxRunning: maxRunning, RateMilli: rateMilli, Burst: burst}}}
}

// wakeTenant wakes the oldest waiter of each queue of tenant: a tenant's
// running task ended under its concurrency limit, and any of its queues
// may now claim one. The event carries no pending counts of the other
// queues, so one waiter each looks and sleeps again if it finds nothing;
// it runs on the apply goroutine and must not read Pebble.
func (h *hub) wakeTenant(tenant string) {
	h.mu.Lock()
	var refs []fsm.QueueRef
	for ref := range h.queues {
		if ref.Tenant == tenant {
			refs = append(refs, ref)
		}
	}
	h.mu.Unlock()
	for _, ref := range refs {
		h.wakeQueue(ref, 1)
	}
}
