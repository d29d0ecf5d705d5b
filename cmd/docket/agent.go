package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/cmd/docket/server"
	"github.com/dockethq/docket/internal/connlimit"
	"github.com/dockethq/docket/transport"
)

// agentFlags binds every knob of a node to a flag. The help text of each is
// the short form of the field's doc in cluster.Config.
func agentFlags(fs *flag.FlagSet) (*cluster.Config, *agentOpts) {
	c := cluster.DefaultConfig()
	o := &agentOpts{}
	fs.StringVar(&c.ID, "id", "", "unique, stable server id (required)")
	fs.StringVar(&c.DataDir, "data-dir", "", "directory for the Raft log, snapshots and the Pebble state (required)")
	fs.StringVar(&c.RaftAddr, "raft-addr", "127.0.0.1:7501", "address Raft binds and advertises to other servers")
	fs.StringVar(&o.grpcAddr, "grpc-addr", "127.0.0.1:7401", "address the client API binds and advertises")
	fs.StringVar(&o.join, "join", "", "comma-separated gossip addresses (--gossip-addr) of servers already in the cluster; one live one is enough, and a restarted server also finds its old peers without it")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", 0, "servers in the first configuration: 1 bootstraps alone, N>1 waits until N servers gossip and none holds a configuration, 0 joins an existing cluster")
	fs.StringVar(&c.GossipAddr, "gossip-addr", "127.0.0.1:7301", "host:port gossip (memberlist, UDP and TCP) binds and advertises; the port scheme is gRPC 74xx, Raft 75xx, gossip 73xx")
	fs.StringVar(&o.gossipKeyFile, "gossip-key-file", "", "file of gossip encryption keys, base64, one a line, the primary first (docket gossip keygen); reloaded on SIGHUP to rotate (or DOCKET_GOSSIP_KEY, not reloaded; never a flag value). None: plain gossip, which anyone who reaches the port can join")
	fs.BoolVar(&c.GossipLocal, "gossip-local", false, "memberlist timings for loopback (docket dev, tests): failures seen in about 1 s instead of 5-10 s")
	fs.BoolVar(&c.LeaveOnTerminate, "leave-on-terminate", false, "on SIGTERM leave the cluster for good (configuration and gossip) before stopping; off: a restart keeps the server in the configuration")
	fs.DurationVar(&c.DeadServerTimeout, "dead-server-timeout", c.DeadServerTimeout, "the leader removes a server failed this long, while at least --min-quorum voters remain")
	fs.IntVar(&c.MinQuorum, "min-quorum", c.MinQuorum, "dead-server cleanup never leaves fewer voters than this")
	fs.DurationVar(&c.ServerStabilizationTime, "server-stabilization-time", c.ServerStabilizationTime, "a new server (non-voter) must stay caught up and healthy this long before it is promoted to voter")
	fs.Uint64Var(&c.MaxTrailingLogs, "max-trailing-logs", c.MaxTrailingLogs, "a non-voter within this many entries of the leader counts as caught up")
	fs.DurationVar(&c.HeartbeatTimeout, "heartbeat-timeout", c.HeartbeatTimeout, "follower waits this long without the leader before an election; bounds failover")
	fs.DurationVar(&c.ElectionTimeout, "election-timeout", c.ElectionTimeout, "candidate waits this long for votes (>= heartbeat timeout)")
	fs.DurationVar(&c.LeaderLeaseTimeout, "leader-lease-timeout", c.LeaderLeaseTimeout, "leader steps down after this long without a quorum (< heartbeat timeout)")
	fs.DurationVar(&c.CommitTimeout, "commit-timeout", c.CommitTimeout, "idle leader tells followers the commit index this often")
	fs.IntVar(&c.MaxAppendEntries, "max-append-entries", c.MaxAppendEntries, "entries per AppendEntries RPC")
	fs.Uint64Var(&c.SnapshotThreshold, "snapshot-threshold", c.SnapshotThreshold, "log entries since the last snapshot that trigger a new one")
	fs.DurationVar(&c.SnapshotInterval, "snapshot-interval", c.SnapshotInterval, "how often the snapshot threshold is checked")
	fs.Uint64Var(&c.TrailingLogs, "trailing-logs", c.TrailingLogs, "entries kept after a snapshot for followers to catch up from")
	fs.IntVar(&c.LogCacheSize, "log-cache", c.LogCacheSize, "recent log entries kept in memory")
	fs.Uint64Var(&c.LogMaxBytes, "log-max-bytes", c.LogMaxBytes, "bound the Raft log's bytes, its entries and its files on disk: over it take a snapshot that keeps only the newest entries fitting in a quarter of it; raft-wal segments are a sixteenth of it (0: entry counts only, 64 MiB segments)")
	fs.StringVar(&c.LogStore, "log-store", c.LogStore, "Raft log store: wal (raft-wal, one fsync per append) or bolt (raft.db, two); default: the store the data dir holds, wal for a new one. A node keeps the store it was created with")
	fs.DurationVar(&c.ReapInterval, "reap-interval", c.ReapInterval, "how often the leader scans for expired leases")
	fs.DurationVar(&c.ReapGrace, "reap-grace", c.ReapGrace, "a new leader waits this long before its first reap (>= a worker heartbeat interval)")
	fs.DurationVar(&c.PromoteInterval, "promote-interval", c.PromoteInterval, "how often the leader makes due delayed tasks pending")
	fs.DurationVar(&c.ScheduleInterval, "schedule-interval", c.ScheduleInterval, "how often the leader enqueues the due slots of recurring tasks (schedules)")
	fs.DurationVar(&c.PurgeInterval, "purge-interval", c.PurgeInterval, "how often the leader purges finished tasks past retention")
	fs.DurationVar(&c.ApplyLagBound, "apply-lag-bound", c.ApplyLagBound, "health says NOT_SERVING when a committed entry waits longer than this to be applied, or Pebble stalls writes this long")
	fs.Int64Var(&c.BallastBytes, "ballast-size", DefaultBallastBytes, "bytes of the data dir's BALLAST file, created at start when missing and the disk has twice that free; delete it to free space on a full disk (0: none)")
	fs.DurationVar(&c.CheckInterval, "check-interval", c.CheckInterval, "how often the leader checks that every voter's keyspace hash agrees; a node that differs stops serving (negative: off, and restarted nodes stay NOT_SERVING)")
	fs.DurationVar(&c.CheckTimeout, "check-timeout", c.CheckTimeout, "how long the leader waits for the voters' hashes of one consistency check, once its own is done")
	fs.Int64Var(&c.CheckRate, "check-rate", c.CheckRate, "bytes a second each node reads to hash its keyspace for a consistency check (negative: full speed); a check a restarted node waits on runs at full speed")
	fs.DurationVar(&c.ScrubInterval, "scrub-interval", c.ScrubInterval, "how often each node re-reads its keyspace's table and blob files and then its Raft log from disk and verifies their checksums, at --check-rate; damage stops the node (negative: off)")
	fs.IntVar(&c.Limits.MaxPayload, "max-payload", c.Limits.MaxPayload, "largest payload, result or progress in bytes (at most 16 MiB)")
	fs.Uint64Var(&c.TenantMaxTasks, "tenant-max-tasks", c.TenantMaxTasks, "tasks one tenant may store until purged, finished ones included; past it enqueue is refused with ResourceExhausted (0: no limit; keep equal on every node)")
	fs.Uint64Var(&c.TenantMaxBytes, "tenant-max-bytes", c.TenantMaxBytes, "encoded task bytes one tenant may store until purged; past it enqueue is refused with ResourceExhausted (0: no limit; keep equal on every node)")
	memoryLimitFlag(fs, &c.Service.MemoryLimit)
	fs.DurationVar(&c.ClockOffset, "test-clock-offset", 0, "TEST ONLY: shift this node's clock, for the chaos harness")
	fs.IntVar(&c.CheckpointEntries, "checkpoint-entries", 0, "EXPERIMENTAL: write the keyspace to Pebble once every this many applied entries, each task record once (0: every apply batch); a crash replays up to that many more from the Raft log")
	fs.IntVar(&c.Service.CoalesceMax, "coalesce-max", service.DefaultCoalesceMax, "client commands the leader folds into one Raft entry under load (1: off)")
	fs.IntVar(&c.Service.CoalesceInflight, "coalesce-inflight", service.DefaultCoalesceInflight, "entries of client commands in flight before the leader starts to coalesce")
	fs.IntVar(&o.fdReserve, "fd-reserve", 0, "file descriptors kept from connections for Pebble, raft.db, snapshots and outgoing connections (0: 1536, or half the file limit when less)")
	fs.IntVar(&o.maxConns, "max-conns", 0, "client API connections held at once; past it a connection is closed at accept (0: all the file limit leaves after the reserve and Raft)")
	fs.IntVar(&o.raftMaxConns, "raft-max-conns", 0, "inbound Raft connections held at once (0: 128, or a quarter of what the reserve leaves when less)")
	fs.Func("max-streams-per-conn", fmt.Sprintf("calls in flight on one client connection; more wait (default %d)", transport.DefaultMaxConcurrentStreams), func(v string) error {
		n, err := strconv.ParseUint(v, 10, 32)
		o.api.MaxConcurrentStreams = uint32(n)
		return err
	})
	fs.IntVar(&o.api.MaxLongPolls, "max-long-polls", transport.DefaultMaxLongPolls, "long polls (Claim or WaitResult with a wait) waiting at once on this node; past it Unavailable/OVERLOADED")
	fs.IntVar(&o.api.MaxLongPollsPerConn, "max-long-polls-per-conn", transport.DefaultMaxLongPollsPerConn, "long polls waiting at once on one client connection")
	fs.DurationVar(&o.api.MaxConnectionIdle, "max-conn-idle", transport.DefaultMaxConnectionIdle, "close a client connection with no call in flight for this long")
	fs.DurationVar(&o.api.MaxConnectionAge, "max-conn-age", 0, "close any client connection this old, after a grace for calls in flight (0: never)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json")
	fs.BoolVar(&o.api.Auth, "auth", false, "require a bearer token (docket token create) on every Queue and Cluster call but Status; off: no token needed")
	fs.StringVar(&o.bootstrapTokenFile, "bootstrap-token-file", "", "file holding the bootstrap admin token's secret, used on the cluster's first boot only (or DOCKET_BOOTSTRAP_TOKEN; never a flag value)")
	fs.StringVar(&o.debugAddr, "debug-addr", "", "serve Prometheus /metrics and Go's /debug/pprof/ profiles on this address (off when empty). With TLS and --auth: HTTPS with this node's certificate and a bearer token on every request (/metrics: reader or admin over \"*\"; profiles: admin over \"*\"), on any address; otherwise plain HTTP, and only a loopback address")
	fs.StringVar(&o.httpAddr, "http-addr", "", "serve the web dashboard on this address (off when empty); a client of this node's API with the viewer's token. With TLS and --auth: HTTPS with this node's certificate and a login, on any address; otherwise plain HTTP, and only a loopback address")
	agentTLSFlags(fs, o)
	agentFloodFlags(fs, o)
	return &c, o
}

// DefaultBallastBytes is docket agent's ballast: enough for Pebble to
// flush its memtables (2 x 32 MiB) and the node to catch up once an
// operator deletes it, small beside any real volume.
const DefaultBallastBytes = 64 << 20

type agentOpts struct {
	grpcAddr, join, logLevel, logFormat, debugAddr string
	httpAddr                                       string
	bootstrapTokenFile, gossipKeyFile              string
	api                                            transport.Config
	fdReserve, maxConns, raftMaxConns              int
	tls                                            agentTLS
}

func runAgent(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, o := agentFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log, err := newLogger(stderr, o.logLevel, o.logFormat)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	cfg.Logger = log
	applyMemoryLimit(cfg.Service.MemoryLimit, log)
	if cfg.BootstrapSecret, err = secretFrom(o.bootstrapTokenFile, envBootstrapToken); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	cfg.JoinToken = os.Getenv(envToken)
	if cfg.BootstrapSecret != "" && !o.api.Auth {
		log.Warn("a bootstrap token is set but --auth is off: the token is created, and no call needs it")
	}
	cfg.GRPCAddr = o.grpcAddr
	cfg.Join = splitList(o.join)
	if cfg.GossipKeys, err = gossipKeys(o.gossipKeyFile); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	warnKeyFileMode(log, o.gossipKeyFile)
	o.api.Logger = log
	plan, err := planFDs(o.fdReserve, o.raftMaxConns, o.maxConns)
	if err != nil {
		return err
	}
	log.Info("file descriptors", "limit", plan.Limit, "reserve", plan.Reserve, "pebble_files", plan.PebbleFiles,
		"raft_conns", plan.RaftConns, "grpc_conns", plan.GRPCConns)
	cfg.RaftMaxConns, cfg.MaxOpenFiles = plan.RaftConns, plan.PebbleFiles
	reloader, err := setupTLS(o, cfg, &o.api, log)
	if err != nil {
		return err
	}
	defer watchHUP(ctx, reloader, log)()
	var guard *debugGuard
	if o.debugAddr != "" {
		// An agent that runs TLS and --auth asks the same of its debug
		// server, on any address; only such a server may leave loopback.
		secure := reloader != nil && o.api.Auth
		if err := checkDebugAddr(o.debugAddr, secure); err != nil {
			return err
		}
		if secure {
			guard = &debugGuard{tls: reloader}
		}
		// Metrics are registered only when something serves them.
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		o.api.Registerer = reg
		cfg.Service.Registerer = reg
		if err := bridgeRaftMetrics(reg); err != nil {
			return err
		}
		_, stop, err := serveDebug(o.debugAddr, reg, log, guard)
		if err != nil {
			return err
		}
		defer stop()
	}
	if o.httpAddr != "" {
		if err := checkHTTPAddr(o.httpAddr, reloader != nil && o.api.Auth); err != nil {
			return err
		}
		_, stop, err := serveDashboard(o.httpAddr, o.grpcAddr, o.api.Auth, reloader, o.api.Registerer, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	return serve(ctx, *cfg, o.api, plan.GRPCConns, log, guard, o.gossipKeyFile)
}

// serve runs one node until ctx ends, then stops it gracefully: the API
// stops taking work, leadership moves, Raft shuts down, stores close. The
// API holds at most maxConns connections at once (fdPlan). guard, when
// not nil, is handed the node to check the debug server's tokens with.
func serve(ctx context.Context, cfg cluster.Config, api transport.Config, maxConns int, log *slog.Logger, guard *debugGuard, gossipKeyFile string) error {
	raw, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.GRPCAddr, err)
	}
	lis := connlimit.New(raw, maxConns, "grpc", log)
	cfg.GRPCAddr = lis.Addr().String()
	if api.Registerer != nil {
		registerListener(api.Registerer, lis)
	}
	srv, err := server.Start(cfg, api, lis)
	if err != nil {
		return err
	}
	node := srv.Node
	if guard != nil {
		guard.setNode(node)
	}
	log.Info("serving", "id", cfg.ID, "grpc", cfg.GRPCAddr, "raft", cfg.RaftAddr, "data", cfg.DataDir)
	if err := writePIDFile(cfg.DataDir); err != nil {
		log.Warn("no pid file; docket dev cannot see this node's pid", "err", err)
	} else {
		defer removePIDFile(cfg.DataDir, log)
	}

	if gossipKeyFile != "" {
		defer watchGossipKeys(ctx, node, gossipKeyFile, log)()
	}

	select {
	case <-ctx.Done():
	case <-srv.Served():
	case <-node.Left(): // docket cluster leave
		log.Info("left the cluster; stopping")
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Stop(stopCtx)
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// registerListener exports a listener's open connections and refusals.
func registerListener(reg prometheus.Registerer, l *connlimit.Listener) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "docket_grpc_connections",
			Help: "Client API connections open now."}, func() float64 { return float64(l.Open()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "docket_grpc_connections_limit",
			Help: "Client API connections held at most (fd plan)."}, func() float64 { return float64(l.Limit()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "docket_grpc_connections_refused_total",
			Help: "Client API connections closed at accept because the limit was reached."}, func() float64 { return float64(l.Refused()) }),
	)
}
