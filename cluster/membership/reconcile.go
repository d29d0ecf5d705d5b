package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/gossip"
	"github.com/dockethq/docket/cluster/peer"
	"github.com/dockethq/docket/cluster/replica"
)

// Raft is the part of hashicorp/raft that reconcile drives, as
// raft-autopilot's RaftInterface is; *raft.Raft has it.
type Raft interface {
	GetConfiguration() raft.ConfigurationFuture
	AddNonvoter(id raft.ServerID, address raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	AddVoter(id raft.ServerID, address raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	RemoveServer(id raft.ServerID, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	CurrentTerm() uint64
	LastIndex() uint64
}

// Host is what reconcile reads of its node beside Raft.
type Host interface {
	// LatchedLevel is the feature level the cluster latched (0: none).
	LatchedLevel() uint32
	// Leaving reports whether the node is leaving the cluster: it then
	// changes no configuration.
	Leaving() bool
	// MapRaftErr turns a Raft error into the node's outcome errors.
	MapRaftErr(err error) error
}

// ReconcileConfig tunes a Reconciler (cluster.Config documents each).
type ReconcileConfig struct {
	Self            string
	Log             *slog.Logger
	Interval        time.Duration
	ApplyTimeout    time.Duration
	MaxTrailingLogs uint64
	Rules           Rules
}

// Reconciler is the leader's membership reconcile: it runs Decide over
// the configuration, the gossip pool and the non-voters' health, and
// applies its actions. It keeps one term's state (HealthySince, and when
// servers gossip never showed were first missed), so a new leader makes a
// new one.
type Reconciler struct {
	cfg     ReconcileConfig
	log     *slog.Logger
	raft    Raft
	host    Host
	gossip  *gossip.Gossip
	pool    *peer.Pool
	book    *Book
	removed *Removals

	healthySince map[string]time.Time
	absentSince  map[string]time.Time
}

// NewReconciler returns one term's reconciler.
func NewReconciler(cfg ReconcileConfig, r Raft, h Host, g *gossip.Gossip, pool *peer.Pool, book *Book, removed *Removals) *Reconciler {
	return &Reconciler{cfg: cfg, log: cfg.Log, raft: r, host: h, gossip: g, pool: pool, book: book, removed: removed,
		healthySince: map[string]time.Time{}, absentSince: map[string]time.Time{}}
}

// Run reconciles on every kick (a gossip event), right away (the caller
// starts it after the leader's Barrier) and every Interval, until ctx
// ends.
func (r *Reconciler) Run(ctx context.Context, kick <-chan struct{}) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		if err := r.Once(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, replica.ErrNotLeader) {
			r.log.Warn("reconcile failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
	}
}

// Once is one round of reconcile.
func (r *Reconciler) Once(ctx context.Context) error {
	if r.host.Leaving() {
		return nil
	}
	f := r.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("reconcile: configuration: %w", err)
	}
	servers := f.Configuration().Servers
	now := time.Now()
	in := Input{Self: r.cfg.Self, Servers: servers, Members: map[string]gossip.Member{}, HealthySince: r.healthySince, Now: now,
		Rules:   r.cfg.Rules,
		Removed: r.removed.Recent(now, r.cfg.Rules.RemovedHold),
		Enabled: r.host.LatchedLevel()}
	for _, m := range r.gossip.Members() {
		in.Members[m.ID] = m
	}
	inCfg := map[string]bool{}
	for _, s := range servers {
		id := string(s.ID)
		inCfg[id] = true
		m, known := in.Members[id]
		if id == r.cfg.Self || (known && m.Status != gossip.StatusFailed) {
			delete(r.absentSince, id)
			continue
		}
		// A server gossip shows failed, or does not show at all, but that
		// still answers Status on its gRPC address is alive: a build from
		// before gossip during a rolling upgrade across the change, or a
		// server whose gossip alone is cut. decide leaves it alone.
		if r.answersStatus(ctx, id) {
			delete(r.absentSince, id)
			delete(in.Members, id)
			continue
		}
		if known {
			continue
		}
		// A server gossip never showed this leader (it died before this
		// leader joined the pool) counts as failed from now.
		since, ok := r.absentSince[id]
		if !ok {
			since = now
			r.absentSince[id] = now
		}
		in.Members[id] = gossip.Member{Meta: gossip.Meta{ID: id, RaftAddr: string(s.Address)}, Status: gossip.StatusFailed, Since: since}
	}
	r.sampleHealth(ctx, servers, in.Members, now)

	var errs []error
	for _, a := range Decide(in) {
		if err := r.apply(ctx, a); err != nil {
			errs = append(errs, err)
		}
	}
	for _, m := range in.Members {
		if !inCfg[m.ID] && m.Status != gossip.StatusAlive {
			r.gossip.Forget(m.ID) // nothing left to decide about it
		}
	}
	return errors.Join(errs...)
}

func (r *Reconciler) apply(ctx context.Context, a Action) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ApplyTimeout)
	defer cancel()
	var f raft.IndexFuture
	switch a.Kind {
	case AddNonvoter:
		f = r.raft.AddNonvoter(raft.ServerID(a.ID), raft.ServerAddress(a.Addr), 0, 0)
	case Promote:
		f = r.raft.AddVoter(raft.ServerID(a.ID), raft.ServerAddress(a.Addr), 0, 0)
	case Remove:
		f = r.raft.RemoveServer(raft.ServerID(a.ID), 0, 0)
	}
	if err := WaitFuture(ctx, f); err != nil {
		return fmt.Errorf("reconcile %s %s: %w", a.Kind, a.ID, r.host.MapRaftErr(err))
	}
	r.log.Info("membership changed", "action", a.Kind.String(), "server", a.ID, "reason", a.Reason)
	return nil
}

// sampleHealth asks each alive non-voter for its term and applied index
// (Cluster.Status over gRPC, as raft-autopilot asks each server) and
// keeps healthySince: set when a server turns healthy, cleared when it is
// not.
func (r *Reconciler) sampleHealth(ctx context.Context, servers []raft.Server, members map[string]gossip.Member, now time.Time) {
	term, last := r.raft.CurrentTerm(), r.raft.LastIndex()
	inCfg := map[string]bool{}
	for _, s := range servers {
		id := string(s.ID)
		inCfg[id] = true
		if s.Suffrage != raft.Nonvoter {
			delete(r.healthySince, id)
			continue
		}
		m := members[id]
		ok := m.Status == gossip.StatusAlive && r.caughtUp(ctx, m, term, last)
		if !ok {
			delete(r.healthySince, id)
		} else if _, was := r.healthySince[id]; !was {
			r.healthySince[id] = now
		}
	}
	for id := range r.healthySince {
		if !inCfg[id] {
			delete(r.healthySince, id)
		}
	}
}

// answersStatus reports whether the server id answers Cluster.Status at
// the gRPC address the peer book knows for it.
func (r *Reconciler) answersStatus(ctx context.Context, id string) bool {
	p, _ := r.book.Get(id)
	st, err := r.pool.Status(ctx, p.GRPCAddr, &pb.StatusRequest{})
	return err == nil && st.GetNodeId() == id
}

// caughtUp reports whether m is in the leader's term and applied within
// MaxTrailingLogs of its last index.
func (r *Reconciler) caughtUp(ctx context.Context, m gossip.Member, term, last uint64) bool {
	st, err := r.pool.Status(ctx, m.GRPCAddr, &pb.StatusRequest{})
	if err != nil || st.GetNodeId() != m.ID {
		return false
	}
	return st.GetTerm() == term && st.GetAppliedIndex()+r.cfg.MaxTrailingLogs >= last
}

// WaitFuture waits for a Raft future or the context.
func WaitFuture(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
