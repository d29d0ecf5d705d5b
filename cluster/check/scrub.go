package check

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/storage"
)

// LogScrubber reads back every entry of a Raft log store and checks it
// (raftlog.Store.ScrubLog); a damaged entry takes the store's own fault
// path before the error comes back.
type LogScrubber interface {
	ScrubLog(ctx context.Context, between func(read int64) error) (entries int, bytes int64, err error)
}

// Scrub re-reads the keyspace's table and blob files from disk every
// ScrubInterval, paced at CheckRate (fsm.FSM.Scrub), and then the Raft
// log's entries (logs, when not nil), until ctx ends. Every node scrubs
// its own disk; nothing goes through Raft. A table that fails its
// checksums makes the node stop serving and leave Raft, as a diverged one
// does, and the damage marker refuses its next start until it is
// repaired. A log entry that fails its checksum takes the store's fault
// path (raftlog.Store.OnFault), as when Raft itself reads it.
func (c *Checker) Scrub(ctx context.Context, f *fsm.FSM, logs LogScrubber) {
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
			if logs != nil && !c.scrubLog(ctx, logs) {
				return
			}
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

// scrubLog reads the log back, paced like the tables; false when the
// scrubs are over (ctx ended, or the log is damaged and the node faulted).
func (c *Checker) scrubLog(ctx context.Context, logs LogScrubber) bool {
	start := time.Now()
	entries, bytes, err := logs.ScrubLog(ctx, func(read int64) error { return pace(ctx, c.cfg.CheckRate, start, read) })
	switch {
	case err == nil:
		c.log.Debug("scrub: every log entry read back sound", "entries", entries, "bytes", bytes, "took", time.Since(start))
		return true
	case ctx.Err() != nil:
		return false
	default:
		// The store reported the damage itself (its fault path takes the
		// node out of service); scrubbing on would only repeat it.
		c.log.Error("SCRUB FAILED: the Raft log could not be read back sound; the scrub stops", "err", err)
		return false
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
