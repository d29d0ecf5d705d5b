package client

import (
	"time"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// State is where a task is in its life. The values mirror
// docketv1.TaskState one to one; StateUnknown stands for
// TASK_STATE_UNSPECIFIED and for any value this build does not know (a
// newer server's), so that a conversion never fails.
type State int

// The states of a task.
const (
	StateUnknown   State = iota // TASK_STATE_UNSPECIFIED, or a state this build does not know
	StatePending                // claimable now
	StateDelayed                // claimable from its run time on
	StateRunning                // claimed under a lease
	StateCompleted              // submitted as completed
	StateFailed                 // submitted as failed: not retried
	StateDead                   // out of attempts: a dead letter, which can be requeued
	StateCancelled              // cancelled, waiting or while it ran
	StateWaiting                // waiting for its parents (a DAG) to end
)

var stateNames = [...]string{"unknown", "pending", "delayed", "running", "completed", "failed", "dead", "cancelled", "waiting"}

// String returns the state's name in lower case, as the docket CLI
// prints it: "pending", "running", ...
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "unknown"
	}
	return stateNames[s]
}

// Finished reports whether the state is an end: completed, failed, dead
// or cancelled, which is when Wait returns. A dead letter may still be
// requeued.
func (s State) Finished() bool {
	switch s {
	case StateCompleted, StateFailed, StateDead, StateCancelled:
		return true
	}
	return false
}

// StateOf converts a wire state. A value this build does not know is
// StateUnknown.
func StateOf(s docketv1.TaskState) State {
	if s <= docketv1.TaskState_TASK_STATE_UNSPECIFIED || int(s) >= len(stateNames) {
		return StateUnknown
	}
	return State(s)
}

// Outcome is how a finished task ended, as its worker reported it or as
// a cancel ended it. The values mirror docketv1.Outcome one to one;
// OutcomeNone stands for OUTCOME_UNSPECIFIED (not finished, or cancelled
// on a cluster before feature level 15), and OutcomeUnknown for a value
// this build does not know.
type Outcome int

// The outcomes of a task.
const (
	OutcomeUnknown   Outcome = -1 // a value this build does not know
	OutcomeNone      Outcome = 0  // OUTCOME_UNSPECIFIED: none yet
	OutcomeCompleted Outcome = 1
	OutcomeFailed    Outcome = 2
	OutcomeCancelled Outcome = 3
)

var outcomeNames = [...]string{"none", "completed", "failed", "cancelled"}

// String returns the outcome's name in lower case: "none", "completed",
// "failed", "cancelled" or "unknown".
func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return "unknown"
	}
	return outcomeNames[o]
}

// OutcomeOf converts a wire outcome. A value this build does not know is
// OutcomeUnknown.
func OutcomeOf(o docketv1.Outcome) Outcome {
	if o < 0 || int(o) >= len(outcomeNames) {
		return OutcomeUnknown
	}
	return Outcome(o)
}

// TaskInfo is a task as Get, GetStale, Wait and ClaimTasks return it: the
// stored record in Go types. (Task is the claimed task a Handler works
// on; Task.Info converts it.) Times are the leader's, zero when unset.
type TaskInfo struct {
	ID       string
	Queue    string
	Tenant   string
	State    State
	Priority uint32 // 0..9, 9 is claimed first

	Payload []byte
	// Result is what the worker submitted; empty until then.
	Result []byte
	// Outcome is how the task ended; OutcomeNone until then.
	Outcome Outcome
	// LastError is the last Nack reason or failed Submit's error.
	LastError string

	// Attempts counts the claims that ended without a Submit (nack, lease
	// expiry); the task is dead-lettered when it reaches MaxAttempts.
	Attempts    uint32
	MaxAttempts uint32

	// Fence is the fencing token of the claim that returned the task, and
	// is set only then (ClaimTasks): it is what Submit, Nack and Heartbeat
	// take. A read (Get, Wait) leaves it 0, so a fence can be used only
	// by the worker that holds the claim.
	Fence uint64
	// WorkerID names the worker of the current or last claim.
	WorkerID string
	// CancelRequested: a cancel reached the task while it ran.
	CancelRequested bool

	CreatedAt  time.Time
	VisibleAt  time.Time // when a delayed task becomes pending
	ClaimedAt  time.Time // the current or last claim
	LeaseUntil time.Time // the current or last claim's lease expiry
	DeadlineAt time.Time // the current or last claim's execution deadline
	FinishedAt time.Time
	ExpireAt   time.Time // when a finished task is purged

	// Parents are the tasks this one waits for (a DAG), in order; Waiting
	// counts those that have not ended yet.
	Parents []string
	Waiting uint32
	// Schedule names the schedule that enqueued the task; empty when a
	// caller did.
	Schedule string
	// Key is the task's unit of fairness (TaskKey); empty: none.
	Key string

	p *docketv1.Task
}

// NewTaskInfo converts a wire task, fence included (the caller knows
// whether it holds the claim). It returns nil for nil. The slices share
// the message's memory.
func NewTaskInfo(p *docketv1.Task) *TaskInfo {
	if p == nil {
		return nil
	}
	return &TaskInfo{
		ID:              p.GetId(),
		Queue:           p.GetQueue(),
		Tenant:          p.GetTenant(),
		State:           StateOf(p.GetState()),
		Priority:        p.GetPriority(),
		Payload:         p.GetPayload(),
		Result:          p.GetResult(),
		Outcome:         OutcomeOf(p.GetOutcome()),
		LastError:       p.GetLastError(),
		Attempts:        p.GetAttempts(),
		MaxAttempts:     p.GetMaxAttempts(),
		Fence:           p.GetFence(),
		WorkerID:        p.GetWorkerId(),
		CancelRequested: p.GetCancelRequested(),
		CreatedAt:       unixTime(p.GetCreatedAt()),
		VisibleAt:       unixTime(p.GetVisibleAt()),
		ClaimedAt:       unixTime(p.GetClaimedAt()),
		LeaseUntil:      unixTime(p.GetLeaseUntil()),
		DeadlineAt:      unixTime(p.GetDeadlineAt()),
		FinishedAt:      unixTime(p.GetFinishedAt()),
		ExpireAt:        unixTime(p.GetExpireAt()),
		Parents:         p.GetParents(),
		Waiting:         p.GetWaiting(),
		Schedule:        p.GetSchedule(),
		Key:             string(p.GetKey()),
		p:               p,
	}
}

// readInfo converts a task that was read, not claimed: without its fence.
func readInfo(p *docketv1.Task) *TaskInfo {
	t := NewTaskInfo(p)
	if t != nil {
		t.Fence = 0
	}
	return t
}

// Proto returns the wire record the TaskInfo was made from, for the
// fields it does not carry (attempt history, retry policy, ...), or nil
// for a TaskInfo built by hand. Do not modify it. Its fence is what the
// server sent, even where the TaskInfo's is 0.
func (t *TaskInfo) Proto() *docketv1.Task { return t.p }

// unixTime converts the wire's Unix nanoseconds; 0 is the zero Time.
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
