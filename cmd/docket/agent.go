package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dockethq/docket/cluster"
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
	fs.StringVar(&o.join, "join", "", "comma-separated gRPC addresses of other servers, for discovery and joining")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", 0, "servers in the first configuration: 1 bootstraps alone, N>1 waits for N servers via --join, 0 joins an existing cluster")
	fs.DurationVar(&c.HeartbeatTimeout, "heartbeat-timeout", c.HeartbeatTimeout, "follower waits this long without the leader before an election; bounds failover")
	fs.DurationVar(&c.ElectionTimeout, "election-timeout", c.ElectionTimeout, "candidate waits this long for votes (>= heartbeat timeout)")
	fs.DurationVar(&c.LeaderLeaseTimeout, "leader-lease-timeout", c.LeaderLeaseTimeout, "leader steps down after this long without a quorum (< heartbeat timeout)")
	fs.DurationVar(&c.CommitTimeout, "commit-timeout", c.CommitTimeout, "idle leader tells followers the commit index this often")
	fs.IntVar(&c.MaxAppendEntries, "max-append-entries", c.MaxAppendEntries, "entries per AppendEntries RPC")
	fs.Uint64Var(&c.SnapshotThreshold, "snapshot-threshold", c.SnapshotThreshold, "log entries since the last snapshot that trigger a new one")
	fs.DurationVar(&c.SnapshotInterval, "snapshot-interval", c.SnapshotInterval, "how often the snapshot threshold is checked")
	fs.Uint64Var(&c.TrailingLogs, "trailing-logs", c.TrailingLogs, "entries kept after a snapshot for followers to catch up from")
	fs.IntVar(&c.LogCacheSize, "log-cache", c.LogCacheSize, "recent log entries kept in memory")
	fs.DurationVar(&c.ReapInterval, "reap-interval", c.ReapInterval, "how often the leader scans for expired leases")
	fs.DurationVar(&c.ReapGrace, "reap-grace", c.ReapGrace, "a new leader waits this long before its first reap (>= a worker heartbeat interval)")
	fs.DurationVar(&c.PromoteInterval, "promote-interval", c.PromoteInterval, "how often the leader makes due delayed tasks pending")
	fs.DurationVar(&c.PurgeInterval, "purge-interval", c.PurgeInterval, "how often the leader purges finished tasks past retention")
	fs.DurationVar(&c.CheckInterval, "check-interval", c.CheckInterval, "how often the leader checks that every voter's keyspace hash agrees; a node that differs stops serving (negative: off, and restarted nodes stay NOT_SERVING)")
	fs.DurationVar(&c.CheckTimeout, "check-timeout", c.CheckTimeout, "how long the leader waits for the voters' hashes of one consistency check")
	fs.IntVar(&c.Limits.MaxPayload, "max-payload", c.Limits.MaxPayload, "largest payload, result or progress in bytes (at most 16 MiB)")
	fs.DurationVar(&c.ClockOffset, "test-clock-offset", 0, "TEST ONLY: shift this node's clock, for the chaos harness")
	fs.IntVar(&o.api.CoalesceMax, "coalesce-max", transport.DefaultCoalesceMax, "client commands the leader folds into one Raft entry under load (1: off)")
	fs.IntVar(&o.api.CoalesceInflight, "coalesce-inflight", transport.DefaultCoalesceInflight, "entries of client commands in flight before the leader starts to coalesce")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json")
	fs.StringVar(&o.debugAddr, "debug-addr", "", "serve Prometheus /metrics and Go's /debug/pprof/ profiles over HTTP on this address (off when empty; bind loopback)")
	return &c, o
}

type agentOpts struct {
	grpcAddr, join, logLevel, logFormat, debugAddr string
	api                                            transport.Config
}

func runAgent(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, o := agentFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := newLogger(stderr, o.logLevel, o.logFormat)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	cfg.Logger = log
	cfg.GRPCAddr = o.grpcAddr
	cfg.Join = splitList(o.join)
	o.api.Logger = log
	if o.debugAddr != "" {
		// Metrics are registered only when something serves them.
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		o.api.Registerer = reg
		_, stop, err := serveDebug(o.debugAddr, reg, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	return serve(ctx, *cfg, o.api, log)
}

// serve runs one node until ctx ends, then stops it gracefully: the API
// stops taking work, leadership moves, Raft shuts down, stores close.
func serve(ctx context.Context, cfg cluster.Config, api transport.Config, log *slog.Logger) error {
	lis, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.GRPCAddr, err)
	}
	cfg.GRPCAddr = lis.Addr().String()
	node, err := cluster.New(cfg)
	if err != nil {
		return errors.Join(err, lis.Close())
	}
	srv := transport.NewServer(node, api)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	log.Info("serving", "id", cfg.ID, "grpc", cfg.GRPCAddr, "raft", cfg.RaftAddr, "data", cfg.DataDir)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stopErr := srv.Stop(stopCtx)
	return errors.Join(serveErr, stopErr, node.Shutdown(stopCtx))
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

// serveDebug serves net/http/pprof on addr until the returned func is
// called. `docket bench` and operators use it to see what bounds a node.
func serveDebug(addr string, reg *prometheus.Registry, log *slog.Logger) (string, func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("debug listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("debug server stopped", "err", err)
		}
	}()
	log.Info("debug server", "addr", lis.Addr().String())
	return lis.Addr().String(), func() { _ = hs.Close() }, nil // closing at exit; nothing to report
}
