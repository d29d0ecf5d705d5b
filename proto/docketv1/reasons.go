package docketv1

import "google.golang.org/grpc/codes"

// The error contract's words. An error the client can act on carries an
// errdetails.ErrorInfo of domain ErrorDomain whose reason is one of the
// Reason constants; a bad field carries an errdetails.BadRequest naming it
// instead. The metadata keys travel in gRPC headers and trailers.
const (
	// ErrorDomain is the domain of every errdetails.ErrorInfo a server sends.
	ErrorDomain = "docket.dev"

	// ReasonStaleFence: FailedPrecondition, the task is not running under
	// that fence. The worker must stop acting on it.
	ReasonStaleFence = "STALE_FENCE"
	// ReasonWrongState: FailedPrecondition, the task's state does not
	// allow the operation.
	ReasonWrongState = "WRONG_STATE"
	// ReasonTenantLimit: ResourceExhausted, every task of an Enqueue would
	// take its tenant past a limit; nothing was stored. Retry later.
	// ResourceExhausted without a reason is a value over a size limit.
	ReasonTenantLimit = "TENANT_LIMIT"
	// ReasonMemoryLimit: ResourceExhausted, the node is at its memory
	// limit (docket agent --memory-limit) and refuses new tasks until
	// workers drain some; nothing was stored. Claims, heartbeats, submits
	// and nacks still run. Retry later.
	ReasonMemoryLimit = "MEMORY_LIMIT"
	// ReasonTimedOut: FailedPrecondition, the task's claim ran past its
	// execution deadline (timeout_ns). The worker must stop.
	ReasonTimedOut = "TIMED_OUT"
	// ReasonCancelled: FailedPrecondition, a Submit under the fence of a
	// claim that Cancel reached (feature level 15): the task ended
	// CANCELLED, nothing of the Submit was kept, and it will not run
	// again. The worker drops its result.
	ReasonCancelled = "CANCELLED"
	// ReasonLeadershipLost: Unavailable, the outcome is unknown.
	ReasonLeadershipLost = "LEADERSHIP_LOST"
	// ReasonNotLeader: Unavailable, nothing was done; retry on the leader
	// named in the MetadataLeader trailer (and the ErrorInfo's
	// ErrorInfoLeaderKey metadata) when known.
	ReasonNotLeader = "NOT_LEADER"
	// ReasonShuttingDown: Unavailable, nothing was done.
	ReasonShuttingDown = "SHUTTING_DOWN"
	// ReasonOverloaded: Unavailable, a bound on what callers may hold at
	// once on this node was reached. Nothing was done; retry after a
	// backoff.
	ReasonOverloaded = "OVERLOADED"
	// ReasonNotServing: Unavailable, nothing was done: this node's keyspace
	// diverged from the majority's or awaits a consistency check after a
	// restart. Retry on another node.
	ReasonNotServing = "NOT_SERVING"
	// ReasonFeatureDisabled: FailedPrecondition, nothing was done: the
	// command needs a feature level the cluster has not enabled, because
	// a server in the configuration runs an older build. The message names
	// the level.
	ReasonFeatureDisabled = "FEATURE_DISABLED"

	// ErrorInfoLeaderKey is the ErrorInfo metadata key of a NOT_LEADER
	// answer that names the leader's gRPC address.
	ErrorInfoLeaderKey = "leader"

	// MetadataLeader names the leader's gRPC address in every answer's
	// header and trailer, when the node knows it.
	MetadataLeader = "docket-leader"
	// MetadataForwarded marks a request a follower forwarded to the
	// leader; a forwarded request is never forwarded again.
	MetadataForwarded = "docket-forwarded"
	// MetadataCluster carries the sending node's cluster id on a node's
	// calls to other nodes (forwarding, status, hashes); a node of another
	// cluster refuses the call with PermissionDenied.
	MetadataCluster = "docket-cluster"
	// MetadataAuthorization carries a caller's token as
	// "Bearer <secret>"; a follower passes it on when it forwards.
	MetadataAuthorization = "authorization"
	// MetadataAppliedIndex is the header in which GetTask sends the applied
	// index its answer was read at, NotFound answers included.
	MetadataAppliedIndex = "docket-applied-index"
)

// ReasonCodes maps every reason a server sends to the gRPC code it comes
// with. It is the list both ends test against: the server sends no
// reason missing here, and the client maps every one.
func ReasonCodes() map[string]codes.Code {
	return map[string]codes.Code{
		ReasonStaleFence:     codes.FailedPrecondition,
		ReasonWrongState:     codes.FailedPrecondition,
		ReasonTenantLimit:    codes.ResourceExhausted,
		ReasonMemoryLimit:    codes.ResourceExhausted,
		ReasonLeadershipLost: codes.Unavailable,
		ReasonNotLeader:      codes.Unavailable,
		ReasonShuttingDown:   codes.Unavailable,
		ReasonOverloaded:     codes.Unavailable,
		ReasonNotServing:     codes.Unavailable,

		ReasonFeatureDisabled: codes.FailedPrecondition,
		ReasonTimedOut:        codes.FailedPrecondition,
		ReasonCancelled:       codes.FailedPrecondition,
	}
}
