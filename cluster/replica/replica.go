package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Replica is what the Service needs from the Raft member under it: a
// cluster.Node, or an in-memory member in tests of the layers above.
type Replica interface {
	// Apply stamps cmd (time, tenant limits) and replicates it as one
	// Raft entry on the leader, returning the FSM's answer. It does not
	// validate: the Service validated cmd where the request arrived, and
	// the FSM judges it again in apply.
	Apply(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error)
	// IsLeader reports whether this member currently leads.
	IsLeader() bool
	// LeaderGRPCAddr is the leader's advertised gRPC address, "" when
	// no leader is known.
	LeaderGRPCAddr() string
	// ReadBarrier makes a following local read linearizable, or returns
	// *NotLeaderError on a follower.
	ReadBarrier(ctx context.Context) error
	// FSM is the member's state machine, for local reads.
	FSM() *fsm.FSM
	// Limits are the queue limits apply enforces on this member.
	Limits() fsm.Limits
	// Now is the member's clock, the leader's when it leads.
	Now() time.Time
	// EnabledLevel is the feature level the member may propose at.
	EnabledLevel() uint32
	// LatchPending reports whether every server in the configuration
	// announced level need, so the leader is about to latch it.
	LatchPending(need uint32) bool
	// LeaderCaughtUp reports whether this member, as leader, applied
	// everything the leaders before it committed (its first Barrier
	// returned).
	LeaderCaughtUp() bool
}

var (
	// ErrNotLeader means this node is not the leader; the command was not
	// applied and may be retried on the leader. Errors carrying it are
	// *NotLeaderError with the leader's identity when known.
	ErrNotLeader = errors.New("not the leader")
	// ErrLeadershipLost means leadership was lost after the command was
	// proposed: it may or may not have been applied. Only idempotent
	// commands may be retried blindly.
	ErrLeadershipLost = errors.New("leadership lost: outcome unknown")
	// ErrShutdown means the node is shutting down; the command was not
	// accepted.
	ErrShutdown = errors.New("node shutting down")
)

// NotLeaderError is ErrNotLeader with a hint of where the leader is.
type NotLeaderError struct {
	LeaderID   string
	LeaderGRPC string // advertised gRPC address; empty when unknown
}

func (e *NotLeaderError) Error() string {
	switch {
	case e.LeaderID == "" && e.LeaderGRPC == "":
		return "not the leader: no leader known"
	case e.LeaderID == "":
		// A hint from the API's view (an address without an id) still
		// names a leader.
		return "not the leader: leader at " + e.LeaderGRPC
	}
	return fmt.Sprintf("not the leader: leader is %s at %s", e.LeaderID, e.LeaderGRPC)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }
