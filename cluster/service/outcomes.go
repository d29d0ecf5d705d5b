package service

import "github.com/dockethq/docket/fsm"

// The outcomes of a command that callers above cluster branch on. They are
// the FSM's own values, named here so that the API layer (transport) needs
// no import of fsm: cluster is the only door to the state machine.
var (
	// ErrNotFound: no such task.
	ErrNotFound = fsm.ErrNotFound
	// ErrStaleFence: the caller's fence is not the task's current claim.
	ErrStaleFence = fsm.ErrStaleFence
	// ErrWrongState: the task is not in a state the command applies to.
	ErrWrongState = fsm.ErrWrongState
	// ErrTenantLimit: the tenant's task or byte limit refused the command.
	ErrTenantLimit = fsm.ErrTenantLimit
	// ErrCancelled: a Submit under a claim that Cancel reached; the task
	// ended CANCELLED and kept nothing of the Submit.
	ErrCancelled = fsm.ErrCancelled
	// ErrTimedOut: the claim ran past its execution deadline (a task's
	// timeout_ns); the worker must stop, and the leader ends the claim.
	ErrTimedOut = fsm.ErrTimedOut
)

// FieldError is a request value that the rules refuse, naming its field.
type FieldError = fsm.FieldError

// QueueRef names one queue of one tenant.
type QueueRef = fsm.QueueRef

// IsTooLarge reports whether err is, or wraps, a FieldError for a byte
// field (payload, result, progress) over its size limit: the API answers
// it ResourceExhausted rather than InvalidArgument. The FieldError's
// TooLarge says so, never the words of its reason.
func IsTooLarge(err error) bool { return fsm.IsTooLarge(err) }
