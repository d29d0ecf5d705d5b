package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dockethq/docket/cluster/membership"
	"github.com/dockethq/docket/storage"
)

// HealthProblems lists why this node should not serve, empty when it
// can: its Raft log cannot be written, Pebble reports background errors
// (until a flush or compaction succeeds and no error follows for
// a moment, or 30 s pass without one; package health), Pebble
// has stalled writes for longer than ApplyLagBound, or an entry committed
// longer than ApplyLagBound ago is not applied, or its log holds a damaged
// entry (LogFault). transport turns a non-empty answer into NOT_SERVING.
func (n *Node) HealthProblems() []string {
	ps := n.health.Problems(time.Now())
	if err := n.LogFault(); errors.Is(err, storage.ErrDamaged) {
		ps = append(ps, err.Error()) // it says "keyspace damaged on disk" and the repair
	} else if err != nil {
		ps = append(ps, "raft log damaged: "+err.Error())
	}
	return ps
}

// applyWatch is the apply watcher's state: the commit index it waits to
// see applied, and since when.
type applyWatch struct {
	target uint64
	since  time.Time
	stuck  bool
}

// watchApply checks, several times per ApplyLagBound, that the entries
// this node knows to be committed get applied, and ends stale episodes.
// It is the only goroutine that sets applyStuck.
func (n *Node) watchApply() {
	defer n.wg.Done()
	every := min(max(n.cfg.ApplyLagBound/5, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	var w applyWatch
	for {
		select {
		case now := <-t.C:
			n.checkApply(&w, now)
			n.health.Expire(now)
		case <-n.ctx.Done():
			return
		}
	}
}

func (n *Node) checkApply(w *applyWatch, now time.Time) {
	if w.target != 0 && n.appliedThrough(w.target) {
		if w.stuck {
			n.log.Info("apply caught up", "index", w.target, "stuck_for", now.Sub(w.since).Round(time.Millisecond))
			n.health.ApplyStuck.Store(nil)
		}
		*w = applyWatch{}
	}
	if w.target == 0 {
		if c := n.raft.CommitIndex(); !n.appliedThrough(c) {
			w.target, w.since = c, now
		}
		return
	}
	if !w.stuck && now.Sub(w.since) > n.cfg.ApplyLagBound {
		w.stuck = true
		applied := n.fsm.AppliedIndex()
		msg := fmt.Sprintf("apply stuck: index %d committed more than %v ago is not applied (applied %d, commit %d)",
			w.target, n.cfg.ApplyLagBound, applied, n.raft.CommitIndex())
		n.health.ApplyStuck.Store(&msg)
		n.log.Error("apply stuck", "waiting_for", w.target, "applied", applied, "bound", n.cfg.ApplyLagBound)
		if n.IsLeader() {
			n.wg.Add(1)
			go n.leaveStuckLeadership(w.target, applied)
		}
	}
}

// leaveStuckLeadership moves leadership away from this node because its
// apply is stuck (a full disk stalls Pebble). A leader that cannot apply
// answers no Propose, and Raft keeps it leader: its replication goroutines
// still send heartbeats, and once its apply queue is full its main loop
// blocks, so it can neither commit nor notice anything. It first asks Raft
// to transfer leadership. If that fails and apply made no progress
// meanwhile, it shuts Raft down, without waiting (the shutdown waits for
// the stuck apply): the heartbeats stop and the others elect. The node
// then stays down, NOT_SERVING, until it is restarted (DESIGN.md).
func (n *Node) leaveStuckLeadership(target, applied uint64) {
	defer n.wg.Done()
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyLagBound)
	err := membership.WaitFuture(ctx, n.raft.LeadershipTransfer())
	cancel()
	switch {
	case n.ctx.Err() != nil:
		return
	case err == nil || !n.IsLeader():
		n.log.Warn("apply stuck: leadership handed over", "transfer_err", err)
		return
	case n.fsm.AppliedIndex() != applied || n.appliedThrough(target):
		n.log.Warn("apply stuck: leadership transfer failed, but apply is moving; staying leader", "err", err)
		return
	case n.voterCount() < 2:
		// Alone, no one else could lead; a Raft that stays up recovers
		// by itself once the disk has space.
		n.log.Error("apply stuck on the only voter: staying leader", "err", err)
		return
	}
	msg := fmt.Sprintf("raft shut down: apply stuck at index %d while leading and leadership transfer failed (%v); restart the node once its disk has space", applied, err)
	n.health.Halted.Store(&msg)
	n.log.Error("apply stuck: shutting Raft down so that another node can lead", "applied", applied, "transfer_err", err)
	n.shutdownRaft() // not waited for: it waits for the stuck apply
	// Raft may not tell NotifyCh while shutting down; stop the leader
	// loops, which could only fail from now on.
	select {
	case n.notify <- false:
	default:
	}
}
