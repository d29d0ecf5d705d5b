package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cluster/raftlog"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
)

// Config configures one node. Zero values take the defaults in
// DefaultConfig; each field says why its default is what it is.
type Config struct {
	// BootstrapSecret, when set, is the secret of the bootstrap admin
	// token (every role over every tenant). The first leader that has one
	// creates the token, once in the cluster's life (latched in the FSM);
	// later boots and leaders log that they ignore it. It comes from a
	// file or the environment (docket agent --bootstrap-token-file,
	// DOCKET_BOOTSTRAP_TOKEN), never a flag, and is never logged.
	BootstrapSecret string `json:"-"`

	// JoinToken is unused since servers join by gossip (DESIGN.md,
	// "Membership"): being in the gossip pool admits a server, so the
	// gossip key is the credential. Kept so that callers that set it
	// (docket agent, from DOCKET_TOKEN) still build; never logged.
	JoinToken string `json:"-"`

	// Service tunes the node's write and read paths (group commit, the
	// default lease); its Logger defaults to the node's.
	Service service.ServiceConfig

	// ID is this server's Raft id. It must be unique in the cluster and
	// stable across restarts: Raft's configuration names servers by it.
	ID string

	// DataDir holds raft.db (log and stable store), snapshots/, fsm/ and
	// peers.json. A node restarted with only its data dir rejoins.
	DataDir string

	// RaftAddr is the TCP address Raft binds and advertises. It must be
	// reachable by every other server.
	RaftAddr string

	// GRPCAddr is the client API address this node advertises to peers, so
	// a follower can tell clients (and forward to) the leader's API address.
	GRPCAddr string

	// BootstrapExpect is how many servers form the first configuration.
	// With 1 the node bootstraps alone. With N > 1 it waits until N
	// servers (itself included) gossip and none holds a configuration yet
	// (the first of them needs no Join: the others join it), then every one of
	// them bootstraps with the same sorted configuration, which Raft treats
	// as one bootstrap. 0 means join an existing cluster through Join.
	// Ignored once the data dir holds Raft state.
	BootstrapExpect int

	// Join lists gossip addresses (GossipAddr) of servers already in the
	// pool; one live one is enough. A node also retries the gossip
	// addresses its peer book remembers, so a restarted server needs no
	// Join. Before gossip, Join took gRPC addresses (README: upgrading).
	Join []string

	// GossipAddr is the host:port gossip binds (UDP and TCP) and
	// advertises. Empty: RaftAddr's host with a free port, which suits
	// tests; docket agent defaults to 127.0.0.1:7301 (the port scheme is
	// gRPC 74xx, Raft 75xx, gossip 73xx).
	GossipAddr string

	// GossipKeys is the gossip keyring, primary first (cluster/gossip);
	// empty means plain gossip, the insecure development path. Never
	// logged. Node.SetGossipKeys rotates it while running.
	GossipKeys [][]byte `json:"-"`

	// GossipLocal selects memberlist timings for loopback (tests, docket
	// dev): a failed server is seen in about a second. Off: memberlist's
	// LAN defaults, about 5-10 s, which tolerate a loaded network.
	GossipLocal bool

	// LeaveOnTerminate makes Shutdown leave the cluster for good first
	// (Node.Leave): out of the configuration and the gossip pool. Default
	// off (docket agent --leave-on-terminate), so a rolling restart, which
	// is a Shutdown and a start, never shrinks the cluster.
	LeaveOnTerminate bool

	// ReconcileInterval is how often the leader reconciles the gossip
	// members into the Raft configuration besides gossip events and
	// elections (reconcile.go). Default 2s: it also paces how often a
	// non-voter's catch-up is sampled on its way to promotion.
	ReconcileInterval time.Duration

	// DeadServerTimeout is how long a server must have been failed (or
	// absent from gossip) before the leader removes it from the
	// configuration. Default 1m: longer than a restart or an upgrade of
	// one node, so a rolling restart never shrinks the cluster, and short
	// enough that a lost machine soon stops counting against quorum. A
	// server removed too early comes back as a non-voter and is promoted
	// again once caught up.
	DeadServerTimeout time.Duration

	// ServerStabilizationTime is how long a non-voter must stay healthy
	// (alive, same term, within MaxTrailingLogs) before it is promoted.
	// Default 10s, raft-autopilot's: a server that flaps never votes.
	ServerStabilizationTime time.Duration

	// MaxTrailingLogs is how far a non-voter's applied index may trail the
	// leader's last index and still count as caught up. Default 250,
	// raft-autopilot's: a fraction of a second of writes under load.
	MaxTrailingLogs uint64

	// MinQuorum is the fewest voters dead-server cleanup may leave: a
	// failed voter is removed only if at least MinQuorum voters remain.
	// Default 3, so a 3-server cluster never shrinks by itself (an
	// operator removes a lost server with docket cluster remove) and a
	// 5-server one may drop to 3. Graceful leaves are not bound by it.
	MinQuorum int

	// HeartbeatTimeout is how long a follower waits without contact from
	// the leader before it starts an election. Default 300ms (raft's is
	// 1s), because it is most of what a leader crash costs. Raft checks
	// every random HeartbeatTimeout..2*HeartbeatTimeout, so a follower
	// notices a dead leader 1x to 3x this after the crash; and a follower
	// refuses (pre-)votes while it still knows a leader, so the election
	// waits for the second of two survivors to notice, or, if that one has
	// the shorter log, for the first one's next election round. With 500ms
	// the first write after a kill -9 of the leader took 0.6-2.4s (worst of
	// ten trials 1.6-2.4s in four runs), missing the 1.5s target; with
	// 300ms 0.35-1.4s (worst of ten 0.9-1.4s in nine runs; BENCHMARKS.md).
	//
	// Lower risks needless elections when a loaded box delays heartbeats
	// (sent every HeartbeatTimeout/10; with pre-vote one slow follower
	// cannot depose the leader, both must time out). At 300ms there were
	// none on the shared 2-core VM with fsync on: the term stayed 2 across
	// `docket bench --workload enqueue --duration 30s` at -c 64 (twice)
	// and -c 256 (load average up to 7.3), with no "heartbeat timeout
	// reached" in any node's log after the first election.
	// On slower disks or busier hosts raise it with --heartbeat-timeout.
	HeartbeatTimeout time.Duration

	// ElectionTimeout is how long a candidate waits for votes before a new
	// round (randomized up to twice this). Default 300ms, matching
	// HeartbeatTimeout, the least raft accepts: a round that fails because
	// the other survivor still had a leader or a longer log is retried
	// soon.
	ElectionTimeout time.Duration

	// CampaignHold is how long a node that awaits its first consistency
	// check holds its campaign back while a checked voter is alive
	// (campaign.go). 0 means 10 election timeouts (3 s by default): long
	// enough for a checked voter to win, short enough that a cluster whose
	// checked voters cannot win (their logs are behind) still elects.
	CampaignHold time.Duration

	// LeaderLeaseTimeout is how long a leader stays leader without hearing
	// from a quorum. Default 250ms: it must be below HeartbeatTimeout so an
	// isolated leader steps down (raft checks when the oldest contact
	// expires, so about 260ms after its last one) before a new one can be
	// elected (300ms at the earliest). It was not lowered with
	// HeartbeatTimeout: less would let a loaded box's scheduling delays
	// make a healthy leader step down.
	LeaderLeaseTimeout time.Duration

	// CommitTimeout is how long the leader waits before sending an
	// AppendEntries that only carries the commit index. Default 10ms, so
	// followers apply (and can serve stale reads) soon after a write.
	CommitTimeout time.Duration

	// MaxAppendEntries caps entries per AppendEntries RPC. Default 512
	// (raft's is 64): with BatchApplyCh many small commands share one
	// append and one fsync, and a follower that fell behind catches up in
	// fewer round trips.
	MaxAppendEntries int

	// SnapshotThreshold is how many log entries since the last snapshot
	// trigger a new one (checked every SnapshotInterval). Default 16384.
	SnapshotThreshold uint64

	// SnapshotInterval is how often Raft checks SnapshotThreshold.
	// Default 30s.
	SnapshotInterval time.Duration

	// TrailingLogs is how many entries stay in the log after a snapshot,
	// so a briefly absent follower catches up from the log rather than a
	// full snapshot. Default 10240.
	TrailingLogs uint64

	// LogMaxBytes bounds the Raft log's size in bytes (logbytes.go): over
	// it the node takes a snapshot, and a snapshot keeps only the newest
	// entries that fit in a quarter of it. Raft alone snapshots by entry
	// count and keeps TrailingLogs entries, which with large entries (1 MiB
	// payloads, or coalesced batches of hundreds of KiB under load) is many
	// GiB. The log's files count too: raft-wal preallocates a segment at
	// every tail cut, and a flapping leader filled a 512 MiB disk with
	// them while the entries stayed small; its segments are a sixteenth of
	// the budget (raftlog.SegmentBytesFor). Default 512 MiB; 0 turns the
	// bound off (and keeps 64 MiB segments). Lower trailing logs mean a
	// follower that fell further behind catches up by a snapshot.
	LogMaxBytes uint64

	// LogCacheSize is how many recent entries raft.NewLogCache keeps in
	// memory, sparing BoltDB reads when replicating. Default 512. The
	// cache counts entries, not bytes, and a coalesced entry carries many
	// callers' commands (hundreds of KiB under load): at 4096 a leader
	// held 726 MiB after filling a 1M-task backlog, against 189 MiB at
	// 512 (BENCHMARKS.md). 512 entries still cover a follower's
	// replication window at hundreds of entries a second.
	LogCacheSize int

	// LogStore is where Raft keeps its log and stable values: LogStoreBolt
	// (raft.db), LogStoreWAL (raft-wal, one fsync per append), or empty:
	// the store the data dir holds, and raftlog.DefaultForNew (wal) in a
	// new one. A node keeps the store it was born with: opening a data dir
	// that holds the other store's files fails with ErrLogStoreMismatch.
	LogStore string

	// ReapInterval is how often the leader scans for expired leases.
	// Default 250ms: a dead worker's task is requeued within lease +
	// ReapInterval + one commit.
	ReapInterval time.Duration

	// ReapGrace is how long a new leader waits, after its Barrier, before
	// its first reap. Default 10s, a third of the default 30s lease: one
	// worker heartbeat interval, so a heartbeat lost in the failover is
	// retried before a leader whose clock runs ahead could expire the lease.
	ReapGrace time.Duration

	// PromoteInterval is how often the leader moves due delayed tasks to
	// pending (claims also promote their own queue, so this only bounds
	// Stats staleness and long-poll wake-ups). Default 250ms.
	PromoteInterval time.Duration

	// PurgeInterval is how often the leader purges finished tasks past
	// retention. Default 5s.
	PurgeInterval time.Duration

	// ScheduleInterval is how often the leader fires the due slots of
	// recurring tasks (schedule.go). Default 250ms: a slot's task is
	// enqueued within this (plus one commit) after its time, a small
	// share of the shortest period, @every 1s. Each round reads every
	// schedule of the local replica: at most fsm.MaxSchedules per tenant.
	ScheduleInterval time.Duration

	// CheckInterval is how often the leader runs a consistency check: it
	// proposes a Check entry, every voter hashes its keyspace at exactly
	// that index (from a Pebble snapshot, off the apply goroutine), and the
	// leader records the majority's hash; a node that differs stops serving
	// and shuts its Raft down (checker.go). Default 1m: a hash reads every
	// key, about a second per GB, so a minute keeps it a small share of
	// the disk and CPU while bounding how long silent damage goes
	// unnoticed. After a check that took d the next waits at least 9d, so
	// on a large keyspace the voters hash at most a tenth of the time (a
	// million tasks at the default CheckRate: a 48 s hash, then 432 s of
	// rest; check.checkIdleFactor says why). A new leader checks at once, and a voter that restarted asks
	// for one (it serves nothing until a check passes on it). Negative
	// turns the checks off, which leaves restarted nodes NOT_SERVING.
	CheckInterval time.Duration

	// CheckTimeout bounds how long the leader waits for the voters' hashes
	// of one check once its own is done. Default 30s.
	CheckTimeout time.Duration

	// CheckRate paces the consistency check's hash, in bytes of keys and
	// values read a second (negative: full speed). Default 8 MiB/s, the
	// rate CockroachDB's consistency checker defaults to. Hashing costs
	// about 11 ms of CPU per MiB here (Pebble's iteration over small keys,
	// then SHA-256): a million tasks are 384 MiB, 4 s of a core on every
	// voter at once each CheckInterval at full speed, and claim p99 at
	// that backlog rose to 2.3-3.3x the empty queue's; at 64 MiB/s the
	// three hashes still took both cores (3.3x); at 8 MiB/s, 1.6-2.5x,
	// against 0.9-1.7x with no check during the sample (BENCHMARKS.md). A
	// check then takes 48 s per million tasks, and CheckInterval's rest
	// after a long check keeps hashing to a tenth of the time. A check
	// that arrives while the last one still hashes is skipped. A check
	// someone waits on (a new leader's first, one a restarted voter asks
	// for) and a node that awaits a check hash at full speed.
	CheckRate int64

	// ScrubInterval is how often each node re-reads its keyspace's table
	// files from disk and verifies their block checksums (scrub.go), at
	// CheckRate. Default 1 hour; negative: off. The consistency check
	// hashes through Pebble's block cache, which keeps the copy read
	// before, so it cannot see bytes that change on disk under a running
	// node.
	ScrubInterval time.Duration

	// PebbleMemTableBytes is the FSM's largest Pebble memtable; 0 keeps
	// the fsm package's default (32 MiB). Tests lower it so that Pebble
	// flushes, and edits its MANIFEST, after a few KiB of writes.
	PebbleMemTableBytes int

	// CheckpointEntries, above 1, lets the FSM write Pebble once every
	// this many applied entries (or at a read, a snapshot or a check)
	// instead of once an apply batch, each task record once as its last
	// value (fsm.Options.CheckpointEntries). 0 commits every batch. A
	// crash replays up to a window more from the Raft log.
	CheckpointEntries int

	// ApplyTimeout bounds a Propose when the caller's context has no
	// deadline. Default 10s.
	ApplyTimeout time.Duration

	// ApplyLagBound is how long an entry this node knows to be committed
	// may stay unapplied before health says NOT_SERVING ("apply stuck").
	// Default 5s: the FSM applies a batch in milliseconds, so an entry
	// still waiting after seconds means Pebble is stalled (a full disk
	// fails every flush and then blocks Commit), or the node is replaying
	// or restoring so far behind that its local reads are not worth
	// serving. The same bound applies to a Pebble write stall. Raising it
	// hides a stuck node longer; lowering it lets a burst on a slow disk
	// flap health.
	ApplyLagBound time.Duration

	// BallastBytes is the size of the ballast file (DataDir/BALLAST)
	// created at start when missing and the disk has room for it twice
	// over. Deleting it frees that much space on a full disk so the node
	// can flush, catch up and take the commands that free space; the node
	// never deletes it itself (DESIGN.md). 0 means no ballast, the library
	// default, so embedded and test nodes do not write it; docket agent
	// defaults to 64 MiB (--ballast-size).
	BallastBytes int64

	// WrapLogStore, when set, wraps the Raft log store (below the
	// LogCache, where a real disk error comes from). It is a
	// fault-injection seam for tests, which fail appends on demand; leave
	// it nil.
	WrapLogStore func(raft.LogStore) raft.LogStore

	// EditFSMOptions, when set, edits the FSM's options before it opens
	// (its filesystem, its feature ceiling). It is a fault-injection seam
	// for tests, like WrapLogStore; leave it nil.
	EditFSMOptions func(*fsm.Options)

	// Limits are the edge's value limits (payload size).
	Limits fsm.Limits

	// RaftMaxConns bounds the inbound connections Raft's listener holds
	// open at once; past it a connection is closed at accept
	// (internal/connlimit). Default 128. Each peer opens at most a pool of
	// 5 (raftMaxPool), a pipeline, a heartbeat and a snapshot connection,
	// about 8, so 128 serves 16 servers; more would only help a flood of
	// connections to the Raft port take the descriptors the stores need
	// and leave a leader unable to write. `docket agent` lowers it when
	// the file limit is small.
	RaftMaxConns int

	// MaxOpenFiles bounds the files Pebble keeps open (its table cache;
	// Pebble's MaxOpenFiles). Default 1000, Pebble's own default. `docket
	// agent` sets it to two thirds of its file descriptor reserve, so the
	// SSTs Pebble opens always have room however many connections arrive.
	MaxOpenFiles int

	// TenantMaxTasks bounds the tasks one tenant may store, in every state
	// until purged (finished tasks count until their retention ends).
	// Default 0: no limit. Past it an Enqueue item is refused with
	// RESOURCE_EXHAUSTED (gRPC ResourceExhausted when every item of the
	// call is): retry once the tenant's tasks finish and are purged. The
	// leader stamps its value into each Enqueue, and the FSM enforces the
	// stamped one, so after a leader change the new leader's limits apply.
	// Keep it equal on every node. No default because the right value
	// depends on the disk and the number of tenants: set it, with
	// TenantMaxBytes, so that no one tenant can fill the disk for all.
	TenantMaxTasks uint64

	// TenantMaxBytes bounds the encoded bytes of one tenant's stored task
	// records (payload, result, progress and about 100 bytes of fields
	// each), like TenantMaxTasks. Default 0: no limit. Pebble's own
	// overhead (indexes, write amplification, snapshots) comes on top, so
	// leave the disk well over TenantMaxBytes times the tenants.
	TenantMaxBytes uint64

	// TLS, when set, turns on mutual TLS for Raft (both ways: only server
	// certificates of the cluster CA are accepted, see cluster/certs) and
	// for the node's own gRPC calls to other nodes (non-voter health,
	// consistency checks), which then expect TLS on every peer's API.
	// Default nil: plain TCP, as before TLS existed. Reload it to rotate
	// certificates; new connections pick the new ones up.
	TLS *certs.Reloader

	// RaftHandshakeTimeout bounds a TLS handshake on the Raft port, so a
	// connection that never completes one gives its connlimit slot back;
	// it also bounds an outgoing Raft dial with its handshake. Default
	// DefaultRaftHandshakeTimeout (5 s): a handshake on a LAN takes a
	// millisecond, and Raft's own dial timeout is 10 s. Unused without TLS.
	RaftHandshakeTimeout time.Duration

	// ClockOffset shifts this node's clock. Only the chaos harness sets it
	// (docket agent --test-clock-offset), to show that leases survive skew.
	ClockOffset time.Duration

	// Logger receives structured logs; nil uses slog.Default().
	Logger *slog.Logger
}

// DefaultRaftHandshakeTimeout is Config.RaftHandshakeTimeout's default.
const DefaultRaftHandshakeTimeout = 5 * time.Second

// DefaultConfig returns a Config with every tunable set to its default.
func DefaultConfig() Config {
	return Config{
		HeartbeatTimeout:   300 * time.Millisecond,
		ElectionTimeout:    300 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond,
		CommitTimeout:      10 * time.Millisecond,
		MaxAppendEntries:   512,
		SnapshotThreshold:  16384,
		SnapshotInterval:   30 * time.Second,
		TrailingLogs:       10240,
		LogCacheSize:       512,
		LogMaxBytes:        512 << 20,
		ReapInterval:       250 * time.Millisecond,
		ReapGrace:          10 * time.Second,
		PromoteInterval:    250 * time.Millisecond,
		PurgeInterval:      5 * time.Second,
		ScheduleInterval:   250 * time.Millisecond,
		ApplyTimeout:       10 * time.Second,
		ApplyLagBound:      5 * time.Second,
		CheckInterval:      time.Minute,
		CheckTimeout:       30 * time.Second,
		CheckRate:          8 << 20,
		ScrubInterval:      time.Hour,
		Limits:             fsm.DefaultLimits(),
		RaftMaxConns:       128,
		MaxOpenFiles:       1000,

		ReconcileInterval:       2 * time.Second,
		DeadServerTimeout:       time.Minute,
		ServerStabilizationTime: 10 * time.Second,
		MaxTrailingLogs:         250,
		MinQuorum:               3,
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	setDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setDur(&c.HeartbeatTimeout, d.HeartbeatTimeout)
	setDur(&c.ElectionTimeout, d.ElectionTimeout)
	setDur(&c.LeaderLeaseTimeout, d.LeaderLeaseTimeout)
	setDur(&c.CommitTimeout, d.CommitTimeout)
	setDur(&c.SnapshotInterval, d.SnapshotInterval)
	setDur(&c.ReapInterval, d.ReapInterval)
	setDur(&c.ReapGrace, d.ReapGrace)
	setDur(&c.PromoteInterval, d.PromoteInterval)
	setDur(&c.PurgeInterval, d.PurgeInterval)
	setDur(&c.ScheduleInterval, d.ScheduleInterval)
	setDur(&c.ApplyTimeout, d.ApplyTimeout)
	setDur(&c.ApplyLagBound, d.ApplyLagBound)
	setDur(&c.CheckInterval, d.CheckInterval)
	setDur(&c.CheckTimeout, d.CheckTimeout)
	setDur(&c.ScrubInterval, d.ScrubInterval)
	if c.CheckRate == 0 {
		c.CheckRate = d.CheckRate
	}
	setDur(&c.RaftHandshakeTimeout, DefaultRaftHandshakeTimeout)
	setDur(&c.ReconcileInterval, d.ReconcileInterval)
	setDur(&c.DeadServerTimeout, d.DeadServerTimeout)
	setDur(&c.ServerStabilizationTime, d.ServerStabilizationTime)
	if c.MaxTrailingLogs == 0 {
		c.MaxTrailingLogs = d.MaxTrailingLogs
	}
	if c.MinQuorum == 0 {
		c.MinQuorum = d.MinQuorum
	}
	if c.MaxAppendEntries == 0 {
		c.MaxAppendEntries = d.MaxAppendEntries
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = d.SnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = d.TrailingLogs
	}
	if c.LogCacheSize == 0 {
		c.LogCacheSize = d.LogCacheSize
	}
	if c.RaftMaxConns == 0 {
		c.RaftMaxConns = d.RaftMaxConns
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = d.MaxOpenFiles
	}
	if c.Limits.MaxPayload == 0 {
		c.Limits = d.Limits
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Service.Logger == nil {
		c.Service.Logger = c.Logger
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.ID == "" {
		errs = append(errs, errors.New("id is required"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is required"))
	}
	if c.RaftAddr == "" {
		errs = append(errs, errors.New("raft address is required"))
	}
	if c.BootstrapExpect < 0 {
		errs = append(errs, fmt.Errorf("bootstrap-expect %d is negative", c.BootstrapExpect))
	}
	if c.LogStore != raftlog.LogStoreAuto && c.LogStore != raftlog.LogStoreBolt && c.LogStore != raftlog.LogStoreWAL {
		errs = append(errs, fmt.Errorf("log store %q: want %q or %q", c.LogStore, raftlog.LogStoreBolt, raftlog.LogStoreWAL))
	}
	if c.LeaderLeaseTimeout >= c.HeartbeatTimeout {
		errs = append(errs, fmt.Errorf("leader lease timeout %v must be below heartbeat timeout %v", c.LeaderLeaseTimeout, c.HeartbeatTimeout))
	}
	return errors.Join(errs...)
}
