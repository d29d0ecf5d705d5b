package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/check"
	"github.com/dockethq/docket/cluster/gossip"
	"github.com/dockethq/docket/cluster/health"
	"github.com/dockethq/docket/cluster/membership"
	"github.com/dockethq/docket/cluster/peer"
	"github.com/dockethq/docket/cluster/raftlog"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
)

// Node is one Docket server: Raft, its stores, the FSM, the leader-only
// loops and peer discovery. It is safe for concurrent use.
type Node struct {
	// svc is the node's write and read paths for the API layer: group
	// commit, long polls, reads at a chosen consistency (Service).
	svc *service.Service

	cfg   Config
	log   *slog.Logger
	clock replica.Clock

	fsm   *fsm.FSM
	store *raftlog.Store
	logs  raft.LogStore // the LogCache over store
	// logDiskBytes is what the log's files held on disk at the last
	// sample (watchLogBytes).
	logDiskBytes atomic.Uint64
	snaps        *raft.FileSnapshotStore
	transport    *raft.NetworkTransport
	gate         *raftlog.Gate // the transport as Raft has it; nil until Raft starts
	raft         *raft.Raft

	peers  *membership.Book
	gossip *gossip.Gossip
	// gossipChanged wakes discover on any gossip event; reconcileKick
	// wakes the leader's reconcile.
	gossipChanged chan struct{}
	reconcileKick chan struct{}
	leaving       atomic.Bool         // Leave started: no rejoin, no announcements
	left          chan struct{}       // closed when Leave finished
	removed       membership.Removals // servers an operator removed on this node as leader
	health        *health.Tracker
	notify        chan bool // Raft's NotifyCh, which followLeadership reads

	logFault *logFault      // damage found in the log while running (logfault.go)
	ident    *peer.Identity // the cluster's id, checked on every peer (package peer)
	campaign campaignView
	check    *check.Checker
	pool     *peer.Pool // node-to-node gRPC: status, hashes, membership

	ctx    context.Context // cancelled by Shutdown; parent of every loop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// readyTerm is the term in which this node, as leader, completed a
	// Barrier: from then on its commit index covers every entry earlier
	// leaders committed, which linearizable reads rely on.
	readyTerm atomic.Uint64
	latchWait atomic.Bool // the log said why the feature level is held back
	role      *roleState  // term and leader for every log line

	shutdownOnce sync.Once
	shutdownErr  error

	raftDownOnce sync.Once
	raftDown     raft.Future // Raft's shutdown, started once (shutdownRaft)
}

// New opens the node's stores, applies the boot rule, starts Raft and the
// loops that follow leadership and discover peers.
func New(cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("cluster config: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := check.CheckMarker(cfg.DataDir); err != nil {
		return nil, err
	}
	role := &roleState{}
	log := slog.New(roleHandler{Handler: cfg.Logger.Handler(), s: role}).With("node", cfg.ID)
	health.EnsureBallast(cfg.DataDir, cfg.BallastBytes, log)
	n := &Node{cfg: cfg, log: log, role: role, clock: replica.Offset(cfg.ClockOffset),
		health: health.New(log, cfg.ApplyLagBound), logFault: newLogFault(),
		gossipChanged: make(chan struct{}, 1), reconcileKick: make(chan struct{}, 1), left: make(chan struct{})}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			n.cancel()
			if n.svc != nil {
				n.svc.Close()
			}
			n.closeStores()
		}
	}()

	var err error
	fopts := fsm.Options{Logger: log, OnDiskEvent: n.health.OnDiskEvent, MaxOpenFiles: cfg.MaxOpenFiles, OnLogFault: n.logFault.set,
		MemTableBytes: cfg.PebbleMemTableBytes, CheckpointEntries: cfg.CheckpointEntries}
	if cfg.EditFSMOptions != nil {
		cfg.EditFSMOptions(&fopts)
	}
	if n.fsm, err = fsm.Open(filepath.Join(cfg.DataDir, "fsm"), fopts); err != nil {
		return nil, err
	}
	n.svc = service.New(n, cfg.Service)
	var parts raftParts
	err = openRaftStores(cfg, log, &parts)
	n.store, n.logs, n.snaps = parts.store, parts.logs, parts.snaps
	n.health.Logs = parts.guard
	if err != nil {
		return nil, err
	}
	if err := n.store.VerifyApplied(n.fsm.AppliedIndex()); err != nil {
		return nil, err // a log shorter than the keyspace lost entries (raftlog)
	}
	restarted, err := raft.HasExistingState(n.logs, n.store, n.snaps)
	if err != nil {
		return nil, fmt.Errorf("read raft state: %w", err)
	}
	n.check = check.New(n.ctx, checkHost{n}, cfg.checkConfig(log), restarted)
	if err := n.bootRestore(); err != nil {
		return nil, err
	}
	n.ident = peer.NewIdentity(n.fsm.ClusterID, log)
	n.pool = peer.New(n.peerDialOptions()...)
	if err := openRaftTransport(cfg, log, n.ident, &parts); err != nil {
		return nil, err
	}
	n.transport = parts.transport
	if err := n.recoverIfAsked(&parts); err != nil {
		return nil, err
	}
	n.cfg.RaftAddr = string(n.transport.LocalAddr())
	cfg.RaftAddr = n.cfg.RaftAddr
	if n.peers, err = membership.OpenBook(filepath.Join(cfg.DataDir, "peers.json")); err != nil {
		return nil, err
	}
	n.peers.Put(membership.Peer{ID: cfg.ID, RaftAddr: cfg.RaftAddr, GRPCAddr: cfg.GRPCAddr})

	n.fsm.SetCheckObserver(n.check.Observe)
	notify := make(chan bool, 16)
	n.notify = notify
	n.store.OnFault = n.logFault.set
	n.gate = &raftlog.Gate{NetworkTransport: n.transport, May: n.mayCampaign, Asked: &n.campaign.asked}
	if n.raft, err = raft.NewRaft(n.raftConfig(notify), n.fsm, n.logs, n.store, n.snaps, n.gate); err != nil {
		return nil, fmt.Errorf("start raft: %w", err)
	}
	role.raft.Store(n.raft)
	if reg := cfg.Service.Registerer; reg != nil {
		errs := []error{reg.Register(n.collector()), reg.Register(newKeyMetricsCollector(n.fsm, n.IsLeader))} // keymetrics.go
		for _, g := range n.logBytesGauges() {
			errs = append(errs, reg.Register(g))
		}
		if err := errors.Join(errs...); err != nil {
			// A second node on one registry (tests): its metrics stay local.
			log.Warn("node metrics not registered", "err", err)
		}
	}
	if err := n.bootstrapIfAlone(); err != nil {
		return nil, errors.Join(err, n.raft.Shutdown().Error())
	}
	if err := n.startGossip(); err != nil {
		return nil, errors.Join(err, n.raft.Shutdown().Error())
	}
	n.wg.Add(8)
	go func() {
		defer n.wg.Done()
		role.observeLeaders(n.raft, n.ctx.Done())
	}()
	go n.followLeadership(notify)
	go n.discover()
	go n.joinLoop()
	go n.watchApply()
	go n.watchLogFault()
	go n.watchLogBytes()
	go func() {
		defer n.wg.Done()
		n.check.Scrub(n.ctx, n.fsm, n.store)
	}()
	ok = true
	log.Info("node started", "raft", cfg.RaftAddr, "grpc", cfg.GRPCAddr, "gossip", n.gossip.Addr(), "applied", n.fsm.AppliedIndex())
	return n, nil
}

func (n *Node) raftConfig(notify chan bool) *raft.Config {
	return raftConfig(n.cfg, n.log, notify)
}

// bootRestore is DESIGN.md's boot rule: local Pebble is trusted only when
// its applied index reaches the newest snapshot's; otherwise (Pebble lost
// unsynced writes, or the node was down while the log was compacted) it is
// rebuilt from that snapshot before Raft replays the log above it.
func (n *Node) bootRestore() error {
	metas, err := n.snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	if len(metas) == 0 || n.fsm.AppliedIndex() >= metas[0].Index {
		return nil
	}
	meta, rc, err := n.snaps.Open(metas[0].ID)
	if err != nil {
		return fmt.Errorf("open snapshot %s: %w", metas[0].ID, err)
	}
	n.log.Info("restoring snapshot at boot", "snapshot", meta.ID, "snapshot_index", meta.Index, "fsm_applied", n.fsm.AppliedIndex())
	if err := n.fsm.Restore(rc); err != nil {
		return fmt.Errorf("restore snapshot %s: %w", meta.ID, err)
	}
	return nil
}

// FSM is the node's state machine, for local reads.
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// Limits are the edge's value limits.
func (n *Node) Limits() fsm.Limits { return n.cfg.Limits }

// Now is the node's clock, the one that stamps commands.
func (n *Node) Now() time.Time { return n.clock.Now() }

// ID is this server's Raft id.
func (n *Node) ID() string { return n.cfg.ID }

// IsLeader reports whether this node is the Raft leader right now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the current leader's id and advertised gRPC address, each
// empty when unknown.
func (n *Node) Leader() (id, grpcAddr string) {
	_, lid := n.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	p, _ := n.peers.Get(string(lid))
	return string(lid), p.GRPCAddr
}

// LeaderGRPCAddr is the leader's advertised gRPC address, "" when unknown.
func (n *Node) LeaderGRPCAddr() string {
	_, addr := n.Leader()
	return addr
}

// Snapshot takes a snapshot now and compacts the log behind it.
func (n *Node) Snapshot() error {
	if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// Shutdown stops the node gracefully: leader loops stop, leadership moves
// to another voter when this node leads a multi-server cluster, Raft shuts
// down, gossip stops, and the stores close. The node stays in the Raft
// configuration, so a rolling restart does not shrink the cluster, unless
// Config.LeaveOnTerminate asks it to Leave first. The caller stops the API
// server first, so no new work arrives.
func (n *Node) Shutdown(ctx context.Context) error {
	return n.stop(func() {
		if n.cfg.LeaveOnTerminate {
			if err := n.Leave(ctx); err != nil {
				n.log.Warn("leave at shutdown failed", "err", err)
			}
		}
		if n.IsLeader() && n.voterCount() > 1 {
			if err := membership.WaitFuture(ctx, n.raft.LeadershipTransfer()); err != nil {
				n.log.Warn("leadership transfer at shutdown failed", "err", err)
			}
		}
	})
}

// stop runs first (if any), then stops the loops and Raft and closes the
// stores, once, however many times it is called.
func (n *Node) stop(first func()) error {
	n.shutdownOnce.Do(func() {
		if first != nil {
			first()
		}
		n.cancel()
		n.svc.Close()
		err := n.shutdownRaft().Error()
		n.wg.Wait()
		n.check.Close() // after Raft: its apply goroutine starts the hashes
		err = errors.Join(err, n.pool.Close())
		if n.gossip != nil {
			err = errors.Join(err, n.gossip.Shutdown())
		}
		n.shutdownErr = errors.Join(err, n.closeStores())
		n.log.Info("node stopped", "err", n.shutdownErr)
	})
	return n.shutdownErr
}

// shutdownRaft starts Raft's shutdown once and returns its future, so that
// stop waits for a shutdown leaveStuckLeadership started, rather than
// closing the stores under an apply that is still running.
func (n *Node) shutdownRaft() raft.Future {
	n.raftDownOnce.Do(func() { n.raftDown = n.raft.Shutdown() })
	return n.raftDown
}

func (n *Node) closeStores() error {
	var errs []error
	// The gate first: it waits for a heartbeat Raft still handles, which
	// may write the stable store (raftlog.Gate).
	switch {
	case n.gate != nil:
		errs = append(errs, n.gate.Close())
	case n.transport != nil:
		errs = append(errs, n.transport.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	if n.fsm != nil {
		errs = append(errs, n.fsm.Close())
	}
	return errors.Join(errs...)
}

// Crash stops the node as a kill would, without handing leadership over,
// so the others must notice the silence and elect. Unlike kill -9 it keeps
// what the OS had buffered; the chaos harness covers lost writes. For tests.
func (n *Node) Crash() error { return n.stop(nil) }

// collector is the node's Prometheus collector (metrics.go).
func (n *Node) collector() *metricsCollector {
	return newMetricsCollector(metricsSource{Raft: n.raft, FSM: n.fsm, Clock: n.clock, Health: n.health,
		LeaderChanges: n.role.changes.Load, Status: n.Status, CheckState: func() string { return n.check.Status().GetStatus() },
		Hashing: n.check.Hashing,
		Serving: func() bool { return len(n.HealthProblems()) == 0 && n.CheckErr() == nil }})
}

// Service is the node's write and read paths, what the API layer calls.
func (n *Node) Service() *service.Service { return n.svc }
