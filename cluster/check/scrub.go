package check

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/storage"
)

// Scrub re-reads the keyspace's table and blob files from disk every
// ScrubInterval, paced at CheckRate (fsm.FSM.Scrub), until ctx ends. Every node scrubs its
// own disk; nothing goes through Raft. A table that fails its checksums
// makes the node stop serving and leave Raft, as a diverged one does, and
// the damage marker refuses its next start until it is repaired.
func (c *Checker) Scrub(ctx context.Context, f *fsm.FSM) {
	if c.cfg.ScrubInterval < 0 {
		return
	}
	t := time.NewTicker(c.cfg.ScrubInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		st, err := f.Scrub(ctx, func(read int64) error { return pace(ctx, c.cfg.CheckRate, start, read) })
		switch {
		case err == nil:
			c.log.Debug("scrub: every table read back sound", "tables", st.Tables, "bytes", st.Bytes, "took", time.Since(start))
		case ctx.Err() != nil:
			return
		case errors.Is(err, storage.ErrDamaged):
			c.scrubFailed(err)
			return
		default:
			c.log.Warn("scrub did not finish", "err", err)
		}
	}
}

// scrubFailed takes a node whose disk holds damaged tables out of service,
// as the checker does for a diverged one.
func (c *Checker) scrubFailed(err error) {
	c.log.Error("SCRUB FAILED: a table of this node's keyspace is damaged on disk; it stops serving and shuts Raft down", "err", err)
	if !c.setDamaged(fmt.Sprintf("scrub: %v", err)) {
		return
	}
	c.h.LeaveRaft()
}
