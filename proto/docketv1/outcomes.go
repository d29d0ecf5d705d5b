package docketv1

import (
	"errors"
	"fmt"
)

// The outcomes of a command that callers branch on: the state machine
// answers with a Code, ResultError and ItemError turn codes into these
// errors, and the API maps each to one gRPC code.
var (
	// ErrInvalidArgument means a field's value is out of bounds; nothing
	// changed. The error is a *FieldError naming the field.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound means no task has that id (or it was purged).
	ErrNotFound = errors.New("task not found")
	// ErrStaleFence means the task is not running under exactly that fence:
	// another claim superseded it, or it was reaped. Nothing changed.
	ErrStaleFence = errors.New("stale fence")
	// ErrWrongState means the command does not apply in the task's state,
	// e.g. cancelling a running task.
	ErrWrongState = errors.New("wrong task state")
	// ErrTenantLimit means an enqueued task would take its tenant past a
	// limit on stored tasks or bytes (see TenantLimits); nothing was
	// stored. Retry later, once the tenant's tasks finish and are purged.
	ErrTenantLimit = errors.New("tenant limit reached")
	// ErrTimedOut means the task's claim ran past its execution deadline
	// (NewTask.timeout_ns): a Heartbeat is refused, the worker must stop,
	// and the leader ends the claim. Nothing changed.
	ErrTimedOut = errors.New("execution deadline passed")
	// ErrCancelled means a Submit came under the fence of a claim that
	// Cancel reached: the task ended CANCELLED, nothing of the Submit was
	// kept, and it will not run again. The worker drops its result.
	ErrCancelled = errors.New("task cancelled")
)

// FieldError is an ErrInvalidArgument that names the offending field, as
// "tasks[3].queue".
type FieldError struct {
	Field  string
	Reason string // for people; nothing branches on its words
	// TooLarge marks a byte field over its size limit (payload, result,
	// progress): the API answers it ResourceExhausted, not InvalidArgument.
	// Only the validator sets it; a CommandResult carries it as
	// error_too_large, so an FSM rejection keeps it.
	TooLarge bool
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("invalid argument: %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidArgument }

// InList is e as the field of item i of list: "tasks[3].queue". It keeps
// every property of e but the field's name.
func (e *FieldError) InList(list string, i int) *FieldError {
	c := *e
	c.Field = fmt.Sprintf("%s[%d].%s", list, i, e.Field)
	return &c
}

// Fill writes the whole-command rejection of e into res.
func (e *FieldError) Fill(res *CommandResult) {
	res.ErrorCode, res.ErrorField, res.ErrorDetail = Code_CODE_INVALID_ARGUMENT, e.Field, e.Reason
	res.ErrorTooLarge = e.TooLarge
}

// IsTooLarge reports whether err is, or wraps, a FieldError for a byte
// field over its size limit.
func IsTooLarge(err error) bool {
	var fe *FieldError
	return errors.As(err, &fe) && fe.TooLarge
}

// ResultError turns a whole-command rejection into an error, nil when the
// command was accepted (items may still carry their own codes).
func ResultError(r *CommandResult) error {
	if r == nil {
		return errors.New("no result")
	}
	if r.GetErrorCode() == Code_CODE_OK {
		return nil
	}
	if r.GetErrorCode() == Code_CODE_INVALID_ARGUMENT {
		return &FieldError{Field: r.GetErrorField(), Reason: r.GetErrorDetail(), TooLarge: r.GetErrorTooLarge()}
	}
	return CodeError(r.GetErrorCode(), r.GetErrorField(), r.GetErrorDetail())
}

// ItemError turns one item's code into an error; nil for OK, DUPLICATE and
// ALREADY_DONE, which are successful answers.
func ItemError(it *ItemResult) error {
	switch it.GetCode() {
	case Code_CODE_OK, Code_CODE_DUPLICATE, Code_CODE_ALREADY_DONE:
		return nil
	}
	err := CodeError(it.GetCode(), "", it.GetDetail())
	if id := it.GetTaskId(); id != "" {
		return fmt.Errorf("task %s: %w", id, err)
	}
	return err
}

// CodeError maps an FSM code to its sentinel error. CODE_INVALID_ARGUMENT
// becomes a FieldError that is never TooLarge: the code alone cannot say
// so; ResultError reads error_too_large too.
func CodeError(c Code, field, detail string) error {
	switch c {
	case Code_CODE_OK, Code_CODE_DUPLICATE, Code_CODE_ALREADY_DONE:
		return nil
	case Code_CODE_INVALID_ARGUMENT:
		return &FieldError{Field: field, Reason: detail}
	case Code_CODE_NOT_FOUND:
		return wrapDetail(ErrNotFound, detail)
	case Code_CODE_STALE_FENCE:
		return wrapDetail(ErrStaleFence, detail)
	case Code_CODE_WRONG_STATE:
		return wrapDetail(ErrWrongState, detail)
	case Code_CODE_RESOURCE_EXHAUSTED:
		return wrapDetail(ErrTenantLimit, detail)
	case Code_CODE_TIMED_OUT:
		return wrapDetail(ErrTimedOut, detail)
	case Code_CODE_CANCELLED:
		return wrapDetail(ErrCancelled, detail)
	default:
		return fmt.Errorf("code %v: %s", c, detail)
	}
}

func wrapDetail(err error, detail string) error {
	if detail == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, detail)
}
