package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/dockethq/docket/storage"
)

// scrubLoop re-reads the keyspace's table files from disk every
// ScrubInterval, paced at CheckRate (fsm.FSM.Scrub). Every node scrubs its
// own disk; nothing goes through Raft. A table that fails its checksums
// makes the node stop serving and leave Raft, as a diverged one does, and
// the damage marker refuses its next start until it is repaired.
func (n *Node) scrubLoop() {
	defer n.wg.Done()
	if n.cfg.ScrubInterval < 0 {
		return
	}
	t := time.NewTicker(n.cfg.ScrubInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		st, err := n.fsm.Scrub(n.ctx, func(read int64) error { return pace(n.ctx, n.cfg.CheckRate, start, read) })
		switch {
		case err == nil:
			n.log.Debug("scrub: every table read back sound", "tables", st.Tables, "bytes", st.Bytes, "took", time.Since(start))
		case n.ctx.Err() != nil:
			return
		case errors.Is(err, storage.ErrDamaged):
			n.scrubFailed(err)
			return
		default:
			n.log.Warn("scrub did not finish", "err", err)
		}
	}
}

// scrubFailed takes a node whose disk holds damaged tables out of service,
// as the checker does for a diverged one.
func (n *Node) scrubFailed(err error) {
	n.log.Error("SCRUB FAILED: a table of this node's keyspace is damaged on disk; it stops serving and shuts Raft down", "err", err)
	if !n.check.setDamaged(fmt.Sprintf("scrub: %v", err)) {
		return
	}
	n.leaveRaft()
}
