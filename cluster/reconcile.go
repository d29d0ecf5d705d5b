package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/gossip"
	"github.com/dockethq/docket/cluster/replica"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// reconcileRules are the knobs of decide (Config documents each).
type reconcileRules struct {
	DeadServerTimeout time.Duration
	Stabilization     time.Duration
	MinQuorum         int
	// RemovedHold is how long a server an operator removed is not added
	// back while gossip still shows it alive as it was before the remove.
	RemovedHold time.Duration
}

// reconcileInput is everything decide looks at: the leader's view at
// one instant.
type reconcileInput struct {
	Self    string
	Servers []raft.Server // the latest configuration
	// Members holds every gossip member and, for each server of the
	// configuration that gossip does not know, a failed entry since the
	// leader first missed it.
	Members map[string]gossip.Member
	// HealthySince holds, per server, since when it has been healthy
	// without a break: alive, same term, within MaxTrailingLogs.
	HealthySince map[string]time.Time
	Now          time.Time
	Rules        reconcileRules
	// Removed holds, per server an operator removed (RemoveServer) on this
	// leader, when.
	Removed map[string]time.Time
	// Enabled is the feature level the cluster latched: a member whose
	// build is below it would stop at its first newer entry, so it is not
	// added.
	Enabled uint32
}

type actionKind int

const (
	actAddNonvoter actionKind = iota + 1
	actPromote
	actRemove
)

func (k actionKind) String() string {
	return map[actionKind]string{actAddNonvoter: "add-nonvoter", actPromote: "promote", actRemove: "remove"}[k]
}

// reconcileAction is one change to the configuration.
type reconcileAction struct {
	Kind   actionKind
	ID     string
	Addr   string // Raft address, for adds
	Reason string
}

// decide is the reconcile rule book (DESIGN.md, "Membership"), a pure
// function of the leader's view. In order:
//
//  1. every alive member outside the configuration is added as a
//     non-voter, unless a server of the configuration holds its Raft
//     address (a wiped server back under a new id), which is removed
//     first, or its build is below the latched feature level (it would
//     stop at its first newer entry);
//  2. servers that announced a leave are removed;
//  3. servers failed (or absent from gossip) for DeadServerTimeout are
//     removed, oldest failure first, only while the voters left stay at
//     MinQuorum or more;
//  4. voter removals of one round stop at (voters-1)/2, so one round can
//     never take away a quorum's worth of votes;
//  5. with no voter removed this round, non-voters healthy for the
//     stabilization time are promoted (never promote and demote in one
//     round: each change's effect on quorum is seen alone).
//
// The leader never removes itself; it leaves by transferring leadership
// first (leave.go).
func decide(in reconcileInput) []reconcileAction {
	var acts []reconcileAction
	inCfg := map[string]raft.Server{}
	byAddr := map[string]string{}
	voters := 0
	for _, s := range in.Servers {
		inCfg[string(s.ID)] = s
		byAddr[string(s.Address)] = string(s.ID)
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	ids := make([]string, 0, len(in.Members))
	for id := range in.Members {
		ids = append(ids, id)
	}
	sort.Strings(ids)

	type candidate struct {
		id, reason string
		since      time.Time
	}
	var replaced, left, failed []candidate
	for _, id := range ids {
		m := in.Members[id]
		if _, ok := inCfg[id]; ok || id == in.Self || m.Status != gossip.StatusAlive || m.RaftAddr == "" || m.Features < in.Enabled {
			continue
		}
		// `docket cluster remove` of a server just stopped: gossip may
		// still show it alive for a few seconds. Adding it back would undo
		// the remove; a restart after the remove (alive since then) is a
		// new start, and is added.
		if at, ok := in.Removed[id]; ok && in.Now.Sub(at) < in.Rules.RemovedHold && !m.Since.After(at) {
			continue
		}
		if old, taken := byAddr[m.RaftAddr]; taken && old != in.Self {
			replaced = append(replaced, candidate{id: old, reason: "its address now belongs to " + id})
			continue
		}
		acts = append(acts, reconcileAction{Kind: actAddNonvoter, ID: id, Addr: m.RaftAddr, Reason: "alive member outside the configuration"})
	}
	for _, s := range in.Servers {
		id := string(s.ID)
		m, ok := in.Members[id]
		if id == in.Self || !ok {
			continue
		}
		switch {
		case m.Status == gossip.StatusLeft:
			left = append(left, candidate{id: id, reason: "announced a leave"})
		case m.Status == gossip.StatusFailed && in.Now.Sub(m.Since) >= in.Rules.DeadServerTimeout:
			failed = append(failed, candidate{id: id, reason: fmt.Sprintf("failed for %v", in.Now.Sub(m.Since).Round(time.Second)), since: m.Since})
		}
	}
	sort.SliceStable(failed, func(i, j int) bool { return failed[i].since.Before(failed[j].since) })

	maxVoterRemovals := (voters - 1) / 2
	removedVoters := 0
	removed := map[string]bool{}
	remove := func(c candidate, boundByQuorum bool) {
		if removed[c.id] {
			return
		}
		if inCfg[c.id].Suffrage == raft.Voter {
			if removedVoters >= maxVoterRemovals {
				return
			}
			if boundByQuorum && voters-removedVoters-1 < in.Rules.MinQuorum {
				return
			}
			removedVoters++
		}
		removed[c.id] = true
		acts = append(acts, reconcileAction{Kind: actRemove, ID: c.id, Reason: c.reason})
	}
	for _, c := range replaced {
		remove(c, true)
	}
	for _, c := range left {
		remove(c, false)
	}
	for _, c := range failed {
		remove(c, true)
	}
	if removedVoters > 0 {
		return acts
	}
	for _, s := range in.Servers {
		id := string(s.ID)
		if s.Suffrage != raft.Nonvoter || removed[id] {
			continue
		}
		m, ok := in.Members[id]
		since, healthy := in.HealthySince[id]
		if ok && m.Status == gossip.StatusAlive && healthy && in.Now.Sub(since) >= in.Rules.Stabilization {
			acts = append(acts, reconcileAction{Kind: actPromote, ID: id, Addr: string(s.Address), Reason: "caught up and stable"})
		}
	}
	return acts
}

// reconciler is one term's reconcile state on the leader: what decide
// needs remembered across rounds.
type reconciler struct {
	healthySince map[string]time.Time
	absentSince  map[string]time.Time
}

// reconcileLoop runs decide on every gossip event, right after the
// leader's Barrier (the caller starts it then) and every
// ReconcileInterval, until ctx ends.
func (n *Node) reconcileLoop(ctx context.Context) {
	r := &reconciler{healthySince: map[string]time.Time{}, absentSince: map[string]time.Time{}}
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		if err := n.reconcileOnce(ctx, r); err != nil && ctx.Err() == nil && !errors.Is(err, replica.ErrNotLeader) {
			n.log.Warn("reconcile failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.reconcileKick:
		}
	}
}

func (n *Node) reconcileOnce(ctx context.Context, r *reconciler) error {
	if n.leaving.Load() {
		return nil
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("reconcile: configuration: %w", err)
	}
	servers := f.Configuration().Servers
	now := time.Now()
	in := reconcileInput{Self: n.cfg.ID, Servers: servers, Members: map[string]gossip.Member{}, HealthySince: r.healthySince, Now: now,
		Rules: reconcileRules{DeadServerTimeout: n.cfg.DeadServerTimeout, Stabilization: n.cfg.ServerStabilizationTime, MinQuorum: n.cfg.MinQuorum,
			RemovedHold: operatorRemoveHold},
		Removed: n.removed.recent(now, operatorRemoveHold),
		Enabled: n.fsm.EnabledLevel()}
	for _, m := range n.gossip.Members() {
		in.Members[m.ID] = m
	}
	inCfg := map[string]bool{}
	for _, s := range servers {
		id := string(s.ID)
		inCfg[id] = true
		m, known := in.Members[id]
		if id == n.cfg.ID || (known && m.Status != gossip.StatusFailed) {
			delete(r.absentSince, id)
			continue
		}
		// A server gossip shows failed, or does not show at all, but that
		// still answers Status on its gRPC address is alive: a build from
		// before gossip during a rolling upgrade across the change, or a
		// server whose gossip alone is cut. decide leaves it alone.
		if n.answersStatus(ctx, id) {
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
	n.sampleHealth(ctx, r, servers, in.Members, now)

	var errs []error
	for _, a := range decide(in) {
		if err := n.applyAction(ctx, a); err != nil {
			errs = append(errs, err)
		}
	}
	for _, m := range in.Members {
		if !inCfg[m.ID] && m.Status != gossip.StatusAlive {
			n.gossip.Forget(m.ID) // nothing left to decide about it
		}
	}
	return errors.Join(errs...)
}

func (n *Node) applyAction(ctx context.Context, a reconcileAction) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
	defer cancel()
	var f raft.IndexFuture
	switch a.Kind {
	case actAddNonvoter:
		f = n.raft.AddNonvoter(raft.ServerID(a.ID), raft.ServerAddress(a.Addr), 0, 0)
	case actPromote:
		f = n.raft.AddVoter(raft.ServerID(a.ID), raft.ServerAddress(a.Addr), 0, 0)
	case actRemove:
		f = n.raft.RemoveServer(raft.ServerID(a.ID), 0, 0)
	}
	if err := waitFuture(ctx, f); err != nil {
		return fmt.Errorf("reconcile %s %s: %w", a.Kind, a.ID, n.mapRaftErr(err))
	}
	n.log.Info("membership changed", "action", a.Kind.String(), "server", a.ID, "reason", a.Reason)
	return nil
}

// sampleHealth asks each alive non-voter for its term and applied index
// (Cluster.Status over gRPC, as raft-autopilot asks each server) and
// keeps healthySince: set when a server turns healthy, cleared when it is
// not.
func (n *Node) sampleHealth(ctx context.Context, r *reconciler, servers []raft.Server, members map[string]gossip.Member, now time.Time) {
	term, last := n.raft.CurrentTerm(), n.raft.LastIndex()
	inCfg := map[string]bool{}
	for _, s := range servers {
		id := string(s.ID)
		inCfg[id] = true
		if s.Suffrage != raft.Nonvoter {
			delete(r.healthySince, id)
			continue
		}
		m := members[id]
		ok := m.Status == gossip.StatusAlive && n.caughtUp(ctx, m, term, last)
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
func (n *Node) answersStatus(ctx context.Context, id string) bool {
	p, _ := n.peers.get(id)
	st, err := n.pool.Status(ctx, p.GRPCAddr, &pb.StatusRequest{})
	return err == nil && st.GetNodeId() == id
}

// caughtUp reports whether m is in the leader's term and applied within
// MaxTrailingLogs of its last index.
func (n *Node) caughtUp(ctx context.Context, m gossip.Member, term, last uint64) bool {
	st, err := n.pool.Status(ctx, m.GRPCAddr, &pb.StatusRequest{})
	if err != nil || st.GetNodeId() != m.ID {
		return false
	}
	return st.GetTerm() == term && st.GetAppliedIndex()+n.cfg.MaxTrailingLogs >= last
}
