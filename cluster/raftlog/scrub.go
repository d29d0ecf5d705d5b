package raftlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// ScrubStats is what one scrub of the log read.
type ScrubStats struct {
	Entries int   // entries read and checked
	Bytes   int64 // their data and extensions
}

// scrubEvery is how many entries a scrub reads between calls of its
// between func: its pacing and cancellation step.
const scrubEvery = 256

// Scrub reads every entry of the log from disk through GetLog, so each is
// checked against its checksum, paced by between (called with the bytes
// read so far; its error ends the scrub). raft-wal checks its frames'
// CRCs only when it recovers the tail of the active segment, and raft.db
// checks nothing: bytes that change in a sealed segment or a page of
// raft.db under a running node would otherwise go unseen until Raft reads
// that entry to replicate it, or until the next start's VerifyLog. A
// damaged entry goes through GetLog's fault path (OnFault), which takes
// the node out of service, and is returned; entries truncated or compacted
// away while the scrub runs are skipped.
func (s *Store) Scrub(ctx context.Context, between func(read int64) error) (ScrubStats, error) {
	var st ScrubStats
	first, err := s.FirstIndex()
	if err != nil {
		return st, fmt.Errorf("scrub: first index: %w", err)
	}
	last, err := s.LastIndex()
	if err != nil {
		return st, fmt.Errorf("scrub: last index: %w", err)
	}
	for idx := first; first > 0 && idx <= last; idx++ {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		var l raft.Log
		if err := s.GetLog(idx, &l); errors.Is(err, raft.ErrLogNotFound) {
			continue
		} else if err != nil {
			return st, fmt.Errorf("scrub: %w", err)
		}
		st.Entries++
		st.Bytes += int64(len(l.Data) + len(l.Extensions))
		if st.Entries%scrubEvery == 0 {
			if err := between(st.Bytes); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}
