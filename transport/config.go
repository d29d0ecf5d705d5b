package transport

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Node is what the server needs from a cluster member. *cluster.Node
// implements it; tests use a one-node fake over a real FSM.
type Node interface {
	// Propose stamps, validates, replicates and applies cmd on the leader
	// and returns the FSM's answer. Errors: *fsm.FieldError, not-leader
	// (nothing proposed), leadership-lost (outcome unknown), shutdown and
	// context errors.
	Propose(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error)
	// IsLeader reports whether this node currently leads.
	IsLeader() bool
	// LeaderGRPCAddr is the leader's advertised gRPC address, "" when no
	// leader is known. On the leader it is its own address.
	LeaderGRPCAddr() string
	// FSM is the local replica, for reads and for the apply observer.
	FSM() *fsm.FSM
	// ReadBarrier makes a following local read linearizable; on a
	// follower it returns a not-leader error.
	ReadBarrier(ctx context.Context) error
	// Status describes the node and the cluster as this node sees them.
	StatusWithHash(withHash bool) (*pb.StatusResponse, error)
	// TransferLeadership hands leadership to toID (any voter when empty)
	// and returns the new leader's id.
	TransferLeadership(ctx context.Context, toID string) (string, error)
	// AddServer adds a voter, or a non-voter, to the Raft configuration.
	AddServer(ctx context.Context, id, raftAddr, grpcAddr string, nonvoter bool) error
	// RemoveServer removes a server from the Raft configuration.
	RemoveServer(ctx context.Context, id string) error
	// Limits are the edge bounds commands are validated with.
	Limits() fsm.Limits
	// Now is the node's clock: the time the leader stamps into commands.
	Now() time.Time
	// CheckErr is nil when the consistency checks let this node serve;
	// otherwise it is diverged or awaiting a check, and the API refuses
	// everything but the Cluster service with Unavailable.
	CheckErr() error
	// CheckHash is this node's keyspace hash at a consistency check index,
	// "" when not (yet) known; the leader collects them through Status.
	CheckHash(index uint64) string
}

// DefaultTenant is the tenant of a request that names none.
const DefaultTenant = "default"

// Defaults of Config fields left zero.
const (
	DefaultMaxRecvMsgSize    = 8 << 20
	DefaultMaxClaimWait      = 30 * time.Second
	DefaultMaxResultWait     = 30 * time.Second
	DefaultLease             = 30 * time.Second
	DefaultHeartbeatWindow   = 2 * time.Millisecond
	DefaultHeartbeatMaxItems = fsm.MaxBatch
	DefaultHealthInterval    = time.Second
	DefaultCoalesceMax       = 512
	DefaultCoalesceInflight  = 4
	DefaultListLimit         = 100
)

// HTTP/2 flow-control windows of the server and of forwarding, per stream
// and per connection. gRPC's default starts at 64 KiB and grows by BDP
// estimation; fixed windows this size never stall a LAN connection that
// multiplexes hundreds of callers, and bound what one connection may
// buffer to ConnWindowSize. Measured: no change in single-task enqueue at
// 256 callers (BENCHMARKS.md); kept for batched calls of large payloads.
const (
	WindowSize     = 1 << 20
	ConnWindowSize = 8 << 20
)

// Config tunes a Server. The zero value is usable: every zero field takes
// its default.
type Config struct {
	// Logger receives the server's messages (Internal errors at Error
	// level, forwarding failures at Debug). nil discards them.
	Logger *slog.Logger

	// MaxRecvMsgSize bounds the bytes of one request. Default 8 MiB: room
	// for a batch of Enqueue payloads at the FSM's default 1 MiB payload
	// limit, while a single oversize payload is still refused by Validate
	// with ResourceExhausted naming the field. A request above it is
	// refused by gRPC itself (ResourceExhausted, no field named).
	MaxRecvMsgSize int

	// MaxClaimWait caps a Claim's long-poll (wait_ns). Default 30 s, the
	// bound the API promises. A longer wait would outlive common proxy
	// idle timeouts.
	MaxClaimWait time.Duration

	// MaxResultWait caps WaitResult's wait_ns. Default 30 s; a client that
	// wants to wait longer calls again.
	MaxResultWait time.Duration

	// DefaultLease is the lease of a Claim that gives no lease_ns.
	// Default 30 s.
	DefaultLease time.Duration

	// HeartbeatWindow is how long the heartbeat batcher waits, after the
	// first heartbeat of a batch arrives, for others to share its Raft
	// entry. Default 2 ms: invisible against leases of seconds, and
	// enough to fold thousands of workers' heartbeats into a few entries.
	HeartbeatWindow time.Duration

	// HeartbeatMaxItems flushes a batch early once it holds this many
	// items. Default and ceiling fsm.MaxBatch (1000), the most one
	// Heartbeat command may carry.
	HeartbeatMaxItems int

	// CoalesceMax bounds the client commands (Enqueue, Claim, Submit,
	// Nack, Cancel) the leader folds into one Batch entry. Default 512:
	// one entry then carries every caller of a busy node's round trip,
	// and a Batch stays far below fsm.MaxBatchCommands. 1 turns
	// coalescing off: each command is an entry of its own.
	CoalesceMax int

	// CoalesceInflight is how many entries of client commands the leader
	// keeps in flight before it starts to coalesce: below it a command is
	// proposed at once, alone. Default 4. Fewer slots make larger
	// batches (less Raft and FSM work per command) at the cost of waiting
	// for a slot; more slots lean on Raft's own batching of appends.
	CoalesceInflight int

	// HealthInterval is how often the Queue service's health status is
	// recomputed from whether a leader is known. Default 1 s.
	HealthInterval time.Duration

	// ForwardDialOptions are used to dial the leader when forwarding.
	// Default: insecure transport credentials. Set TLS credentials here
	// when the cluster's gRPC uses TLS.
	ForwardDialOptions []grpc.DialOption

	// ServerOptions are appended to the gRPC server's options (TLS
	// credentials, keepalive). The message size limit is set by the
	// server itself.
	ServerOptions []grpc.ServerOption

	// Registerer, when set, receives the server's Prometheus metrics
	// (docket_transport_*). nil keeps them unregistered.
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxRecvMsgSize <= 0 {
		c.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	if c.MaxClaimWait <= 0 {
		c.MaxClaimWait = DefaultMaxClaimWait
	}
	if c.MaxResultWait <= 0 {
		c.MaxResultWait = DefaultMaxResultWait
	}
	if c.DefaultLease <= 0 {
		c.DefaultLease = DefaultLease
	}
	if c.HeartbeatWindow <= 0 {
		c.HeartbeatWindow = DefaultHeartbeatWindow
	}
	if c.HeartbeatMaxItems <= 0 || c.HeartbeatMaxItems > fsm.MaxBatch {
		c.HeartbeatMaxItems = DefaultHeartbeatMaxItems
	}
	if c.CoalesceMax <= 0 || c.CoalesceMax > fsm.MaxBatchCommands {
		c.CoalesceMax = min(DefaultCoalesceMax, fsm.MaxBatchCommands)
	}
	if c.CoalesceInflight <= 0 {
		c.CoalesceInflight = DefaultCoalesceInflight
	}
	if c.HealthInterval <= 0 {
		c.HealthInterval = DefaultHealthInterval
	}
	if len(c.ForwardDialOptions) == 0 {
		c.ForwardDialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	return c
}
