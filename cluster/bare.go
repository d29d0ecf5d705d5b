package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/connlimit"
	"github.com/dockethq/docket/cluster/raftlog"
)

// raftParts are the pieces of Raft that a Node and a BareRaft build the same
// way from a Config: the fsync'd BoltDB log and stable store, the LogCache
// over it, the snapshot store and the TCP transport.
type raftParts struct {
	store     *raftlog.Store // checksums over raft.db
	logs      raft.LogStore  // guard over the LogCache over store
	guard     *logGuard
	snaps     *raft.FileSnapshotStore
	transport *raft.NetworkTransport
}

// openRaftStores opens the log, stable and snapshot stores under
// cfg.DataDir and reads the whole log through its checksums, so a damaged
// raft.db stops the start with ErrRaftStoreCorrupt. The log store fsyncs
// every append (NoSync stays false): an acknowledged write is on disk on a
// majority.
func openRaftStores(cfg Config, log *slog.Logger, p *raftParts) error {
	var err error
	if p.store, err = raftlog.Open(cfg.DataDir, cfg.LogStore, log); err != nil {
		return err
	}
	var logs raft.LogStore = p.store
	if cfg.WrapLogStore != nil {
		logs = cfg.WrapLogStore(logs)
	}
	cache, err := raft.NewLogCache(cfg.LogCacheSize, logs)
	if err != nil {
		return fmt.Errorf("log cache: %w", err)
	}
	p.guard = newLogGuard(cache, log.With("component", "raftlog"))
	p.logs = p.guard
	if p.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, raftlog.NewHCLog(log, "raft")); err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	metas, err := p.snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	var snapIndex uint64
	if len(metas) > 0 {
		snapIndex = metas[0].Index
	}
	return p.store.VerifyLog(snapIndex)
}

// openRaftTransport binds cfg.RaftAddr. Port 0 (tests, benchmarks)
// advertises what was bound. Inbound connections are limited to
// cfg.RaftMaxConns (limitedStream), so a flood of connections to the Raft
// port cannot take the descriptors the stores need. With cfg.TLS the same
// listener carries mutual TLS (tlsStream).
func openRaftTransport(cfg Config, log *slog.Logger, ident *Identity, p *raftParts) error {
	addr, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("raft address %s: %w", cfg.RaftAddr, err)
	}
	lis, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("raft listen %s: %w", cfg.RaftAddr, err)
	}
	var advertise net.Addr = addr
	if addr.Port == 0 {
		advertise = lis.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		return errors.Join(fmt.Errorf("raft address %s: not advertisable, bind a specific address", cfg.RaftAddr), lis.Close())
	}
	limited := connlimit.New(lis, cfg.RaftMaxConns, "raft", log)
	var stream raft.StreamLayer = &limitedStream{Listener: limited, advertise: advertise}
	if cfg.TLS != nil {
		stream = &tlsStream{Listener: limited, advertise: advertise, certs: cfg.TLS, timeout: cfg.RaftHandshakeTimeout, ident: ident}
	}
	p.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: raftMaxPool, Timeout: raftIOTimeout, Logger: raftlog.NewHCLog(log, "raft"),
		MaxRPCsInFlight: raftMaxRPCsInFlight,
	})
	return nil
}

// Raft's NetworkTransport settings, as raft.NewTCPTransport was given them,
// but without pipelined replication.
const (
	raftMaxPool   = 5 // pooled outgoing connections per peer
	raftIOTimeout = 10 * time.Second
	// raftMaxRPCsInFlight 1 turns raft's pipelined replication off. With
	// its default of 2 the pipeline's channels are unbuffered, and a
	// follower's failed append (Success=false) or a replication stop while
	// a response is being decoded leaves the decoder blocked handing it on
	// and the next send blocked handing over: the leader never replicates
	// to that follower again while heartbeats keep it from an election,
	// and the leader's Shutdown waits for that goroutine forever (a CI run
	// hung 20 minutes in two tests; grafana/pyroscope#5518 traced the same
	// deadlock). hashicorp/raft documents pipelining as of little benefit
	// with batching (raft#541); BENCHMARKS.md has the before and after.
	raftMaxRPCsInFlight = 1
)

// limitedStream is raft.TCPStreamLayer over a connlimit.Listener.
type limitedStream struct {
	*connlimit.Listener
	advertise net.Addr
}

// Dial opens an outgoing Raft connection. Outgoing connections are not
// counted: there are at most raftMaxPool per peer (plus a pipeline and a
// snapshot), and they come out of the file descriptors' reserve.
func (s *limitedStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

// Addr is the address other servers reach this one at.
func (s *limitedStream) Addr() net.Addr { return s.advertise }

// raftConfig is the raft.Config every Docket server runs with.
func raftConfig(cfg Config, log *slog.Logger, notify chan bool) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(cfg.ID)
	c.HeartbeatTimeout = cfg.HeartbeatTimeout
	c.ElectionTimeout = cfg.ElectionTimeout
	c.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	c.CommitTimeout = cfg.CommitTimeout
	c.MaxAppendEntries = cfg.MaxAppendEntries
	c.BatchApplyCh = true
	c.SnapshotThreshold = cfg.SnapshotThreshold
	c.SnapshotInterval = cfg.SnapshotInterval
	c.TrailingLogs = cfg.TrailingLogs
	// The FSM is persistent: bootRestore decided already whether the
	// snapshot is needed, so Raft must not wipe Pebble with it on every boot.
	c.NoSnapshotRestoreOnStart = true
	c.NotifyCh = notify
	c.Logger = raftlog.NewHCLog(log, "raft")
	return c
}

func (p *raftParts) close() error {
	var errs []error
	if p.transport != nil {
		errs = append(errs, p.transport.Close())
	}
	if p.store != nil {
		errs = append(errs, p.store.Close())
	}
	return errors.Join(errs...)
}

// BareRaft is Raft exactly as a Node runs it (settings, fsync'd log store,
// LogCache, snapshot store, TCP transport) over a caller's FSM, without the
// queue, the leader loops or discovery. `docket bench` runs it with a no-op
// FSM to measure what the Raft log alone does on a machine: the ceiling the
// queue's rates are compared with.
type BareRaft struct {
	Raft  *raft.Raft
	Addr  raft.ServerAddress // the bound Raft address
	parts raftParts
}

// NewBareRaft starts Raft for cfg (ID, DataDir, RaftAddr and the Raft knobs;
// the rest is ignored) over f. It does not bootstrap: call
// Raft.BootstrapCluster on one server.
func NewBareRaft(cfg Config, f raft.FSM) (*BareRaft, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("bare raft config: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	log := cfg.Logger.With("node", cfg.ID)
	b := &BareRaft{}
	if err := openRaftStores(cfg, log, &b.parts); err != nil {
		return nil, errors.Join(err, b.parts.close())
	}
	// A BareRaft has no FSM of ours to read an id from: it checks none.
	if err := openRaftTransport(cfg, log, nil, &b.parts); err != nil {
		return nil, errors.Join(err, b.parts.close())
	}
	b.Addr = b.parts.transport.LocalAddr()
	cfg.RaftAddr = string(b.Addr)
	r, err := raft.NewRaft(raftConfig(cfg, log, nil), f, b.parts.logs, b.parts.store, b.parts.snaps, b.parts.transport)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start raft: %w", err), b.parts.close())
	}
	b.Raft = r
	return b, nil
}

// Close shuts Raft down and closes its stores.
func (b *BareRaft) Close() error {
	return errors.Join(b.Raft.Shutdown().Error(), b.parts.close())
}
