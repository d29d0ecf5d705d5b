package transport

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cluster/peer"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Node is what the server needs from a cluster member itself:
// *cluster.Node, or a *memnode.Node in tests. The queue's write and read
// paths are not here: they are the *service.Service that New takes beside
// the Node.
type Node interface {
	// Identity is the cluster's id and the check that refuses a calling
	// node of another cluster (peer.ErrOtherCluster).
	Identity() *peer.Identity
	// HealthProblems lists why the node cannot serve (its log cannot be
	// written, its store fails, apply is stuck); empty when it can.
	HealthProblems() []string
	// CheckErr is nil when the consistency checks let this node serve;
	// otherwise it is diverged or awaiting a check, and the API refuses
	// everything but the Cluster service with Unavailable.
	CheckErr() error
	// StatusWithHash describes the node and the cluster as this node sees
	// them, with the keyspace hash when asked.
	StatusWithHash(withHash bool) (*pb.StatusResponse, error)
	// CheckHash is this node's keyspace hash at a consistency check index,
	// "" when not (yet) known; the leader collects them through Status.
	CheckHash(index uint64) string
	// TransferLeadership hands leadership to toID (any voter when empty)
	// and returns the new leader's id.
	TransferLeadership(ctx context.Context, toID string) (string, error)
	// AddServer adds a voter, or a non-voter, to the Raft configuration.
	AddServer(ctx context.Context, id, raftAddr, grpcAddr string, nonvoter bool) error
	// RemoveServer removes a server from the Raft configuration.
	RemoveServer(ctx context.Context, id string) error
	// Leave takes this node out of the cluster for good (cluster.ErrLastVoter
	// when it is the only voter); its agent then stops.
	Leave(ctx context.Context) error
	// SaveBackup writes a backup of the keyspace to w, on the leader;
	// RestoreBackupFrom restores one read from r (cluster/backup.go).
	SaveBackup(ctx context.Context, w io.Writer) (cluster.BackupHeader, error)
	RestoreBackupFrom(ctx context.Context, r io.Reader) (cluster.BackupHeader, uint64, error)
}

// Defaults of Config fields left zero.
const (
	DefaultMaxRecvMsgSize = 8 << 20
	DefaultMaxClaimWait   = pb.MaxWait
	DefaultMaxResultWait  = pb.MaxWait
	DefaultHealthInterval = time.Second

	DefaultMaxConcurrentStreams = 2048
	DefaultMaxLongPolls         = 8192
	DefaultMaxLongPollsPerConn  = 1024
	DefaultKeepaliveMinTime     = 5 * time.Second
	DefaultKeepaliveTime        = time.Minute
	DefaultKeepaliveTimeout     = 20 * time.Second
	DefaultMaxConnectionIdle    = 5 * time.Minute
	DefaultHandshakeTimeout     = 10 * time.Second
	DefaultHashInterval         = 5 * time.Second
	DefaultUnprovenTimeout      = 10 * time.Second
	DefaultMaxUnproven          = 1024
	DefaultMaxUnprovenPerIP     = 128
	DefaultUnprovenCallRate     = 20
	// DefaultReadBufferSize is gRPC's read buffer per connection: 32 KiB
	// by gRPC's default, held by every connection, idle or not. A read
	// larger than the buffer bypasses it, so large requests lose nothing.
	DefaultReadBufferSize = 8 << 10
)

// MaxAnswerBytes is the largest answer any RPC of the server can send, and
// the server's send limit. The client's receive limit
// (client.MaxReceiveBytes) is the same number; a test keeps them equal.
// The arithmetic, with fsm's constants:
//
//	one task record        fsm.MaxTaskBytes = 3 x 16 MiB (payload, progress,
//	                       result at fsm.PayloadCeiling) + 64 KiB (last_error)
//	                       + 2 KiB (the rest) + 10 KiB (16 attempts of
//	                       fsm.MaxAttemptBytes)                = 48 MiB + 76 KiB
//	GetTask, WaitResult    one task + 5 (tag, length) + 11 (applied_index or
//	                       done)                               < 48 MiB + 77 KiB
//	Claim, ListDead,       tasks within fsm.AnswerBudget (4 MiB), or one task
//	ListTasks              larger than it alone, + a cursor   < 48 MiB + 77 KiB
//	                       (+ ListTasks' orphaned ids, at most one per task)
//	Stats                  at most fsm.AnswerBudget of queues + a cursor
//	ListKeys               2 lists of fsm.MaxKeysLimit (1,000) keys of at
//	                       most 256 bytes and 4 counts each     < 1 MiB
//	Enqueue, Heartbeat,    at most pb.MaxBatch (1,000) items of a few hundred
//	SubmitBatch,           bytes (id, detail, state, fence) each < 1 MiB
//	RequeueDead
//	SubmitBatch with a     its items (each under 200 bytes: 20-character
//	claim                  id, a detail of about 60, codes, fence, time:
//	                       < 200 KiB) + a Claim's answer  < 48 MiB + 277 KiB
//	Cluster.Status         a few hundred bytes per server
//
// 49 MiB covers the largest with 690 KiB to spare. Only an operator who
// raises --max-payload to the 16 MiB ceiling can make answers that large;
// at the default 1 MiB limit one task is at most 3 MiB + 66 KiB.
const MaxAnswerBytes = 49 << 20

// MaxHeaderListBytes bounds a request's headers (HTTP/2's
// SETTINGS_MAX_HEADER_LIST_SIZE, which also counts 32 bytes a header):
// gRPC's own default is 16 MiB, so a single 8 MiB header and 20,000 small
// ones were accepted.
const MaxHeaderListBytes = 16 << 10

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
	// Auth, when true, requires a bearer token (metadata
	// "authorization: Bearer <secret>") on every Queue and Cluster call
	// but Cluster.Status, checked by one interceptor (auth.go). Off by
	// default in this round: nothing changes for a server without it.
	// Status with with_hash, which reads every key, then needs an admin
	// or reader token over every tenant (hashcache.go).
	Auth bool

	// Logger receives the server's messages (Internal errors at Error
	// level, forwarding failures at Debug). nil discards them.
	Logger *slog.Logger

	// MaxRecvMsgSize bounds the bytes of one request. Default 8 MiB: room
	// for a batch of Enqueue payloads at the FSM's default 1 MiB payload
	// limit, while a single oversize payload is still refused by Node.Check
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

	// MaxConcurrentStreams bounds the calls in flight on one connection
	// (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). Default 2048. A client
	// past it waits for a stream to end (gRPC queues the call) rather
	// than being refused. It is twice MaxLongPollsPerConn, so that long
	// polls never hold every stream of a connection and short calls
	// always get through; and large, because one connection carries
	// every caller of a client process, and a follower forwards all its
	// clients' calls to the leader over one connection.
	MaxConcurrentStreams uint32

	// MaxLongPolls bounds the long polls (Claim with a wait, WaitResult
	// with a wait) waiting at once on this node, forwarded ones included.
	// Default 8192: each costs a goroutine, a timer and a stream, some
	// tens of KiB at most, so the bound holds them under a few hundred
	// MiB; one worker waits in one Claim. Past it a long poll is refused
	// at once with Unavailable, reason OVERLOADED (nothing was done; the
	// Go client retries with backoff). A Claim or WaitResult without a
	// wait is not a long poll and is not counted.
	MaxLongPolls int

	// MaxLongPollsPerConn bounds the long polls waiting at once on one
	// client connection. Default 1024, so one client cannot hold the
	// whole of MaxLongPolls. Calls a follower forwarded are exempt: they
	// share the follower's one connection to the leader and were already
	// counted, per connection, on the follower; MaxLongPolls still
	// bounds them.
	MaxLongPollsPerConn int

	// KeepaliveMinTime is the shortest interval between a client's
	// keepalive pings that the server tolerates
	// (keepalive.EnforcementPolicy.MinTime), with or without calls in
	// flight (PermitWithoutStream). Default 5 s: half the 10 s at which
	// the Go client pings by default, so its pings never count as
	// strikes even when timers run early; a client that pings more often
	// is sent GOAWAY (too_many_pings) after two strikes. gRPC's default,
	// 5 min without streams refused, would cut off clients that keep an
	// idle connection warm.
	KeepaliveMinTime time.Duration

	// KeepaliveTime is how long a connection may be silent before the
	// server pings the client; KeepaliveTimeout is how long it then waits
	// for the ack before it closes the connection. Defaults 1 min and
	// 20 s: a peer that vanished (host down, cable cut, no FIN) gives its
	// connection slot back within about 80 s instead of gRPC's 2 h.
	KeepaliveTime, KeepaliveTimeout time.Duration

	// MaxConnectionIdle closes a connection that has had no call in
	// flight for this long (GOAWAY, then close). Default 5 min: idle
	// connections are the cheapest way to hold connection slots, and a
	// Go client that meets GOAWAY reconnects on its next call. Long polls
	// keep a connection busy, so waiting workers are not cut off.
	MaxConnectionIdle time.Duration

	// MaxConnectionAge, when set, closes any connection this old, after
	// MaxConnectionAgeGrace for calls in flight to end. Default off:
	// clients follow the leader, not a balancer, so spreading them anew
	// gains nothing, and the other bounds already cap what one
	// connection holds. The grace defaults to MaxClaimWait + 10 s, so a
	// long poll in progress is answered.
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration

	// HandshakeTimeout bounds how long a new connection may take to send
	// the HTTP/2 preface (and finish TLS), so a connection that never
	// speaks gives its slot back. Default 10 s (gRPC's is 120 s).
	HandshakeTimeout time.Duration

	// UnprovenTimeout closes a connection that has not carried an
	// authenticated call this long after it was accepted (connguard.go):
	// a call with a valid token, from a client certificate of the cluster
	// CA, or any Docket call when auth is off. Calls open without a token
	// (Status, health) do not count. Default 10 s: a client makes its
	// first call within milliseconds of connecting, and one that is closed
	// reconnects on its next call; an idle flood holds nothing longer.
	UnprovenTimeout time.Duration

	// MaxUnproven bounds the connections not yet proven (see
	// UnprovenTimeout) held at once; past it the oldest connection of the
	// address holding most is closed to make room. Default 1024: at about
	// 50 KiB each (TLS, idle; 117 KB before gRPC's read buffer shrank),
	// some 50 MiB. A flood pushes out its own connections, while a client,
	// which proves itself within milliseconds, holds one at most.
	MaxUnproven int

	// MaxUnprovenPerIP bounds the unproven connections of one remote IP;
	// past it a new connection from that IP is closed at accept. Default
	// 128: one source cannot take the room of every other, and a fleet of
	// workers behind one address that reconnects at once retries the
	// few refused with backoff.
	MaxUnprovenPerIP int

	// UnprovenCallRate is how many calls a second the unproven
	// connections of one remote IP may make, with bursts of twice as many
	// (connguard.go); past it a call waits its turn, and past four waiting
	// the connection is closed and the call refused with Unavailable,
	// reason OVERLOADED. Default 20: a health
	// checker or an operator's Status asks far less often, and a client
	// with a token proves its connection on its first call.
	UnprovenCallRate float64

	// MaxHandshakes bounds the TLS handshakes computing at once
	// (handshake.go); a handshake waiting on its peer holds no slot.
	// Default half the CPUs the Go runtime uses, at least 1: a flood of
	// ClientHellos queues for the slots instead of taking the cores Raft
	// heartbeats and gossip need.
	MaxHandshakes int

	// HashInterval is the shortest time between two computations of the
	// keyspace hash for Cluster.Status with_hash (hashcache.go): every
	// caller in between shares the last one, or waits for the next.
	// Default 5 s: a hash reads every key (about a second of a core per
	// 40 MB), so whatever callers do, hashing costs at most a fifth of a
	// core; an operator or checker comparing nodes asks once per node.
	HashInterval time.Duration

	// HealthInterval is how often health is recomputed from whether a
	// leader is known and the node's HealthProblems. Default 1 s.
	HealthInterval time.Duration

	// ForwardDialOptions are used to dial the leader when forwarding.
	// Default: insecure transport credentials. Set TLS credentials here
	// when the cluster's gRPC uses TLS.
	ForwardDialOptions []grpc.DialOption

	// TLS, when set, serves the API over TLS with the node's certificate
	// (client certificates as ClientAuth says) and forwards to the leader
	// over TLS with it, checking the leader's server certificate
	// (certs.PeerCredentials). Default nil: plaintext, as before. Both read
	// the Reloader per handshake, so a reload reaches new connections.
	TLS *certs.Reloader

	// ClientAuth is what TLS asks of a client's certificate. Default
	// certs.VerifyIfGiven: a certificate is checked when one is given, and
	// clients without one still get in (tokens authenticate them).
	ClientAuth certs.ClientAuth

	// Reflection registers gRPC server reflection, which lists every
	// service and message to anyone who can connect (grpcurl uses it).
	// Default off: it is a map for an attacker and no client needs it.
	Reflection bool

	// ServerOptions are appended to the gRPC server's options (TLS
	// credentials), after the server's own, so they win. The message size
	// limit, keepalive and stream bounds come from the fields above.
	ServerOptions []grpc.ServerOption

	// Registerer, when set, receives the server's Prometheus metrics
	// (docket_transport_*). nil keeps them unregistered.
	Registerer prometheus.Registerer

	// answerLimit lowers the bytes a ClaimBatch answer may take, so that
	// tests can reach it; 0 is MaxAnswerBytes.
	answerLimit int
}

// orDefault sets *v to d when it is zero or negative (unset).
func orDefault[T ~int | ~int64 | ~uint32 | ~float64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	orDefault(&c.MaxRecvMsgSize, DefaultMaxRecvMsgSize)
	orDefault(&c.MaxClaimWait, DefaultMaxClaimWait)
	orDefault(&c.MaxResultWait, DefaultMaxResultWait)
	orDefault(&c.MaxConcurrentStreams, DefaultMaxConcurrentStreams)
	orDefault(&c.MaxLongPolls, DefaultMaxLongPolls)
	orDefault(&c.MaxLongPollsPerConn, DefaultMaxLongPollsPerConn)
	orDefault(&c.KeepaliveMinTime, DefaultKeepaliveMinTime)
	orDefault(&c.KeepaliveTime, DefaultKeepaliveTime)
	orDefault(&c.KeepaliveTimeout, DefaultKeepaliveTimeout)
	orDefault(&c.MaxConnectionIdle, DefaultMaxConnectionIdle)
	orDefault(&c.MaxConnectionAgeGrace, c.MaxClaimWait+10*time.Second)
	orDefault(&c.HandshakeTimeout, DefaultHandshakeTimeout)
	orDefault(&c.UnprovenTimeout, DefaultUnprovenTimeout)
	orDefault(&c.MaxUnproven, DefaultMaxUnproven)
	orDefault(&c.MaxUnprovenPerIP, DefaultMaxUnprovenPerIP)
	orDefault(&c.UnprovenCallRate, DefaultUnprovenCallRate)
	orDefault(&c.MaxHandshakes, max(1, runtime.GOMAXPROCS(0)/2))
	orDefault(&c.HashInterval, DefaultHashInterval)
	orDefault(&c.HealthInterval, DefaultHealthInterval)
	if len(c.ForwardDialOptions) == 0 {
		creds := insecure.NewCredentials()
		if c.TLS != nil {
			creds = c.TLS.PeerCredentials()
		}
		c.ForwardDialOptions = []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	}
	return c
}
