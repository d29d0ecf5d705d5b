package cluster

import (
	"context"
	"sync/atomic"

	"github.com/dockethq/docket/cluster/membership"
)

// logFault latches the first damage found in this node's Raft log while it
// runs: by raft.db's checks (raftlog.Store) or the FSM's proposer-checksum
// check. It is set from Raft's goroutines and must not block them.
type logFault struct {
	err  atomic.Pointer[error]
	done chan struct{} // closed when err is set
}

func newLogFault() *logFault { return &logFault{done: make(chan struct{})} }

func (f *logFault) set(err error) {
	if f.err.CompareAndSwap(nil, &err) {
		close(f.done)
	}
}

func (f *logFault) get() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// LogFault is the damage found in this node's Raft log (raft.db) or in an
// entry it was about to apply, or nil. Once set it stays set: the node has
// given up leading and shut its Raft down, and should report NOT_SERVING
// until an operator repairs it (cluster/DESIGN.md). Errors wrap
// ErrRaftStoreCorrupt or fsm.ErrChecksum.
func (n *Node) LogFault() error { return n.logFault.get() }

// watchLogFault takes the node out of the cluster when its log is damaged:
// it hands leadership over if it leads, then shuts Raft down, so the node
// neither leads, votes, nor replicates the damage, and the others carry on
// with their good copies.
func (n *Node) watchLogFault() {
	defer n.wg.Done()
	select {
	case <-n.ctx.Done():
		return
	case <-n.logFault.done:
	}
	err := n.logFault.get()
	n.log.Error("raft log or keyspace damaged: this node stops serving and shuts its raft down; wipe its data dir and rejoin, or restore it",
		"err", err, "file", n.store.Path())
	if n.IsLeader() && n.voterCount() > 1 {
		ctx, cancel := context.WithTimeout(n.ctx, 4*n.cfg.ElectionTimeout)
		if err := membership.WaitFuture(ctx, n.raft.LeadershipTransfer()); err != nil {
			n.log.Warn("leadership transfer after a log fault failed; shutting down raft anyway", "err", err)
		}
		cancel()
	}
	if err := n.shutdownRaft().Error(); err != nil { // see leaveRaft
		n.log.Error("raft shutdown after a log fault", "err", err)
	}
}
