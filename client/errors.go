package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Sentinel errors. Every error a Client method returns for a server answer
// wraps at most one of them, so callers branch with errors.Is. The original
// gRPC status stays reachable through status.FromError and status.Code.
var (
	// ErrNotFound means the task does not exist: it never did, or it was
	// purged after its retention.
	ErrNotFound = errors.New("docket: not found")

	// ErrStaleFence means the task is not running under the fence given: the
	// lease was lost (reaped, or the task was claimed again). The caller must
	// stop acting on the task; a downstream that checks fences will reject it.
	ErrStaleFence = errors.New("docket: stale fence")

	// ErrFeatureDisabled means the command needs a feature the cluster has
	// not enabled yet: a server runs an older build. Nothing was done;
	// it works once every server is upgraded.
	ErrFeatureDisabled = errors.New("docket: feature not enabled on this cluster")

	// ErrWrongState means the task is in a state that does not allow the
	// operation, e.g. Cancel of a running task, or RequeueDead of a live one.
	ErrWrongState = errors.New("docket: task in wrong state")

	// ErrInvalidArgument means a request field is invalid. The error text
	// names the field. Retrying the same request cannot succeed.
	ErrInvalidArgument = errors.New("docket: invalid argument")

	// ErrTooLarge means a payload, result or batch is above the server's
	// limit (gRPC ResourceExhausted).
	ErrTooLarge = errors.New("docket: too large")

	// ErrTenantLimit means the task would take its tenant past the
	// cluster's limit on stored tasks or bytes (gRPC ResourceExhausted,
	// reason TENANT_LIMIT; an item's CODE_RESOURCE_EXHAUSTED). Nothing
	// was stored. The client does not retry it: retry later, once the
	// tenant's tasks have finished and been purged.
	ErrTenantLimit = errors.New("docket: tenant limit reached")

	// ErrMemoryLimit means the node is at its memory limit (docket agent
	// --memory-limit) and refuses new tasks (gRPC ResourceExhausted,
	// reason MEMORY_LIMIT). Nothing was stored. The client does not retry
	// it: retry later, once workers have drained tasks.
	ErrMemoryLimit = errors.New("docket: node at its memory limit")

	// ErrUnauthenticated means the server wants a token and the call had
	// none, or one it does not accept: unknown, revoked or expired
	// (gRPC Unauthenticated). Not retried.
	ErrUnauthenticated = errors.New("docket: unauthenticated")

	// ErrPermissionDenied means the call's token is valid but its roles
	// or tenants do not allow the call (gRPC PermissionDenied). Not
	// retried.
	ErrPermissionDenied = errors.New("docket: permission denied")

	// ErrNoLeader means no leader could be reached before the caller's
	// deadline: none is elected, or the nodes that know it are unreachable.
	// The request was most likely not applied, but a connection that broke
	// mid-call leaves it as unknown as ErrOutcomeUnknown does.
	ErrNoLeader = errors.New("docket: no leader reachable")

	// ErrOutcomeUnknown means the request may or may not have taken
	// effect: the leader lost its leadership while applying it (the
	// server's LEADERSHIP_LOST), or an attempt got no answer within its
	// budget (WithAttemptTimeout). The client retries it itself for operations
	// that are safe to repeat; it returns it for the others (Nack,
	// RequeueDead, TransferLeadership), and the caller decides.
	ErrOutcomeUnknown = errors.New("docket: outcome unknown")

	// ErrClosed means the Client was closed.
	ErrClosed = errors.New("docket: client closed")
)

// rpcError is a server answer mapped to a sentinel. It keeps the gRPC status
// so that status.Code(err) still sees the code the server sent.
type rpcError struct {
	kind  error // a sentinel, a context error, or nil for codes we do not map
	st    *status.Status
	field string // for ErrInvalidArgument: the field the server named
}

func (e *rpcError) Error() string {
	var b strings.Builder
	if e.kind != nil {
		b.WriteString(e.kind.Error())
	} else {
		fmt.Fprintf(&b, "docket: %s", e.st.Code())
	}
	if e.field != "" {
		fmt.Fprintf(&b, ": field %s", e.field)
	}
	// A stale writer learns only that it is stale: an older server's
	// message names the task's current fence, and a careless caller that
	// retried with it would defeat fencing.
	if msg := e.st.Message(); msg != "" && e.kind != ErrStaleFence {
		// The server's message often starts with the outcome's own words
		// ("unauthenticated: no token"); say them once.
		if e.kind != nil {
			words := strings.TrimPrefix(e.kind.Error(), "docket: ")
			if rest, ok := strings.CutPrefix(msg, words); ok {
				msg = strings.TrimPrefix(rest, ": ")
			}
		}
		if msg != "" {
			b.WriteString(": ")
			b.WriteString(msg)
		}
	}
	return b.String()
}

func (e *rpcError) Unwrap() error { return e.kind }

// GRPCStatus lets status.FromError and status.Code see through the mapping.
func (e *rpcError) GRPCStatus() *status.Status { return e.st }

// mapError is the one place where gRPC codes become the package's sentinel
// errors. Errors that carry no gRPC status (a cancelled context before the
// call started, for instance) are returned as they are.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	var mapped *rpcError
	if errors.As(err, &mapped) {
		return err // already mapped; mapping twice would lose nothing but time
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &rpcError{st: st}
	reason := errorReason(st)
	switch st.Code() {
	case codes.NotFound:
		e.kind = ErrNotFound
	case codes.Unauthenticated:
		e.kind = ErrUnauthenticated
	case codes.PermissionDenied:
		e.kind = ErrPermissionDenied
	case codes.InvalidArgument:
		e.kind = ErrInvalidArgument
		e.field = badField(st)
	case codes.ResourceExhausted:
		switch reason {
		case docketv1.ReasonTenantLimit:
			e.kind = ErrTenantLimit
		case docketv1.ReasonMemoryLimit:
			e.kind = ErrMemoryLimit
		default:
			e.kind = ErrTooLarge
			e.field = badField(st)
		}
	case codes.FailedPrecondition:
		switch reason {
		case docketv1.ReasonStaleFence:
			e.kind = ErrStaleFence
		case docketv1.ReasonWrongState:
			e.kind = ErrWrongState
		case docketv1.ReasonFeatureDisabled:
			e.kind = ErrFeatureDisabled
		case docketv1.ReasonTimedOut:
			e.kind = ErrTimedOut
		case docketv1.ReasonCancelled:
			e.kind = ErrCancelled
		}
	case codes.Unavailable:
		if reason == docketv1.ReasonLeadershipLost {
			e.kind = ErrOutcomeUnknown
		} else {
			e.kind = ErrNoLeader
		}
	case codes.DeadlineExceeded:
		e.kind = context.DeadlineExceeded
	case codes.Canceled:
		e.kind = context.Canceled
	}
	return e
}

// errorInfo returns the Docket ErrorInfo of a status, or nil.
func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && (info.GetDomain() == docketv1.ErrorDomain || info.GetDomain() == "") {
			return info
		}
	}
	return nil
}

// errorReason returns the ErrorInfo reason of a Docket status, or "".
func errorReason(st *status.Status) string { return errorInfo(st).GetReason() }

// errorLeaderHint returns the leader address a NOT_LEADER answer names in
// its ErrorInfo metadata, or "". It backs up the docket-leader metadata.
func errorLeaderHint(err error) string {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return ""
	}
	return errorInfo(st).GetMetadata()[docketv1.ErrorInfoLeaderKey]
}

// badField returns the first field a BadRequest detail names, or "".
func badField(st *status.Status) string {
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				if v.GetField() != "" {
					return v.GetField()
				}
			}
		}
	}
	return ""
}

// ItemError maps the per-item answer of a batch (Enqueue, Heartbeat,
// RequeueDead) to the same sentinels as whole-call errors. It returns nil for
// CODE_OK, CODE_ALREADY_DONE and CODE_DUPLICATE, which are successes.
func ItemError(it *docketv1.ItemResult) error {
	if it == nil {
		return nil
	}
	var kind error
	switch it.GetCode() {
	case docketv1.Code_CODE_OK, docketv1.Code_CODE_ALREADY_DONE, docketv1.Code_CODE_DUPLICATE:
		return nil
	case docketv1.Code_CODE_NOT_FOUND:
		kind = ErrNotFound
	case docketv1.Code_CODE_STALE_FENCE:
		kind = ErrStaleFence
	case docketv1.Code_CODE_INVALID_ARGUMENT:
		kind = ErrInvalidArgument
	case docketv1.Code_CODE_WRONG_STATE:
		kind = ErrWrongState
	case docketv1.Code_CODE_RESOURCE_EXHAUSTED:
		kind = ErrTenantLimit
	case docketv1.Code_CODE_TIMED_OUT:
		kind = ErrTimedOut
	case docketv1.Code_CODE_CANCELLED:
		kind = ErrCancelled
	default:
		return fmt.Errorf("docket: task %s: unknown item code %v: %s", it.GetTaskId(), it.GetCode(), it.GetDetail())
	}
	if it.GetDetail() == "" || kind == ErrStaleFence {
		// No detail for a stale fence: see rpcError.Error.
		return fmt.Errorf("%w: task %s", kind, it.GetTaskId())
	}
	return fmt.Errorf("%w: task %s: %s", kind, it.GetTaskId(), it.GetDetail())
}

// hideStale clears what an older server's STALE_FENCE items tell beyond
// the code (the task's current fence and state): a stale writer must learn
// only that it is stale. Servers from this release send neither.
func hideStale(items []*docketv1.ItemResult) {
	for _, it := range items {
		if it.GetCode() == docketv1.Code_CODE_STALE_FENCE {
			it.Fence, it.State, it.Detail = 0, docketv1.TaskState_TASK_STATE_UNSPECIFIED, ""
		}
	}
}
