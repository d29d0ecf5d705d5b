package raftlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// scrubEvery is how many entries a scrub reads between calls of its
// between func: its pacing and cancellation step.
const scrubEvery = 256

// ScrubLog reads every entry of the log from disk through GetLog, so each is
// checked against its checksum, paced by between (called with the bytes
// read so far; its error ends the scrub). raft-wal checks its frames'
// CRCs only when it recovers the tail of the active segment, and raft.db
// checks nothing: bytes that change in a sealed segment or a page of
// raft.db under a running node would otherwise go unseen until Raft reads
// that entry to replicate it, or until the next start's VerifyLog. A
// damaged entry goes through GetLog's fault path (OnFault), which takes
// the node out of service, and is returned; entries truncated or compacted
// away while the scrub runs are skipped.
// It returns the entries read and their bytes (data and extensions).
func (s *Store) ScrubLog(ctx context.Context, between func(read int64) error) (entries int, bytes int64, err error) {
	first, err := s.FirstIndex()
	if err != nil {
		return 0, 0, fmt.Errorf("scrub: first index: %w", err)
	}
	last, err := s.LastIndex()
	if err != nil {
		return 0, 0, fmt.Errorf("scrub: last index: %w", err)
	}
	for idx := first; first > 0 && idx <= last; idx++ {
		if err := ctx.Err(); err != nil {
			return entries, bytes, err
		}
		var l raft.Log
		if err := s.GetLog(idx, &l); errors.Is(err, raft.ErrLogNotFound) {
			continue
		} else if err != nil {
			return entries, bytes, fmt.Errorf("scrub: %w", err)
		}
		entries++
		bytes += int64(len(l.Data) + len(l.Extensions))
		if entries%scrubEvery == 0 {
			if err := between(bytes); err != nil {
				return entries, bytes, err
			}
		}
	}
	return entries, bytes, nil
}
