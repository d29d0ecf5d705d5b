package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dockethq/docket/cluster/health"
	"github.com/dockethq/docket/cluster/peer"
	"github.com/dockethq/docket/cluster/raftlog"
)

// raftParts are the pieces of Raft that a Node and a BareRaft build the same
// way from a Config: the fsync'd BoltDB log and stable store, the LogCache
// over it, the snapshot store and the TCP transport.
type raftParts struct {
	store     *raftlog.Store // checksums over raft.db
	logs      raft.LogStore  // guard over the LogCache over store
	guard     *health.LogGuard
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
	if p.store, err = raftlog.Open(cfg.DataDir, cfg.LogStore, log, cfg.LogMaxBytes); err != nil {
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
	p.guard = health.NewLogGuard(cache, log.With("component", "raftlog"))
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

// openRaftTransport opens Raft's transport on cfg.RaftAddr (raftlog.OpenTransport).
func openRaftTransport(cfg Config, log *slog.Logger, ident *peer.Identity, p *raftParts) error {
	t, err := raftlog.OpenTransport(raftlog.TransportConfig{Addr: cfg.RaftAddr, MaxConns: cfg.RaftMaxConns, TLS: cfg.TLS,
		HandshakeTimeout: cfg.RaftHandshakeTimeout, Ident: ident, Log: log})
	p.transport = t
	return err
}

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
	// The replication metrics carry the peer as a label; the legacy copies
	// with the peer in the name are a second write per AppendEntries, and a
	// Prometheus name per peer.
	c.NoLegacyTelemetry = true
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
	gate  *raftlog.Gate
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
	b.gate = &raftlog.Gate{NetworkTransport: b.parts.transport} // fences heartbeats at Close
	r, err := raft.NewRaft(raftConfig(cfg, log, nil), f, b.parts.logs, b.parts.store, b.parts.snaps, b.gate)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start raft: %w", err), b.parts.close())
	}
	b.Raft = r
	return b, nil
}

// Close shuts Raft down and closes its stores.
func (b *BareRaft) Close() error {
	return errors.Join(b.Raft.Shutdown().Error(), b.gate.Close(), b.parts.close())
}

// peerDialOptions are the options of the node's gRPC calls to other
// nodes: TLS with its certificate when cfg.TLS is set, else plaintext,
// and this node's cluster id on every call.
func (n *Node) peerDialOptions() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if n.cfg.TLS != nil {
		creds = n.cfg.TLS.PeerCredentials()
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithChainUnaryInterceptor(n.ident.UnaryClient)}
}
