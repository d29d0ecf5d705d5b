package cluster

import (
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// logEntryOverhead is what an entry costs in the store beyond its data and
// extensions (index, term, type, time and the store's own framing), so a
// log of many tiny entries is not counted as nearly empty.
const logEntryOverhead = 48

// minTrailingLogs is the fewest entries the byte budget leaves after a
// snapshot: a follower a moment behind still catches up from the log.
const minTrailingLogs = 64

// logSizes counts the bytes of the entries in the log, by index, as the
// checked store writes, reads at start and deletes them. Raft triggers
// snapshots by entry count only, and keeps TrailingLogs entries after one;
// with large entries (1 MiB payloads, or the leader's coalesced batches of
// hundreds of KiB under load) both let the log grow to many GiB. The node's
// budget watcher (watchLogBytes) reads these counts.
type logSizes struct {
	mu    sync.Mutex
	base  uint64   // index of sizes[0]
	sizes []uint32 // bytes of entries base, base+1, ...
	total uint64   // sum of sizes
	// Entries below a gap (a snapshot installed on a store that keeps
	// them until the next compaction) are counted here until a
	// DeleteRange covers detachedThrough.
	detached        uint64
	detachedThrough uint64
}

func entryBytes(l *raft.Log) uint32 {
	return uint32(len(l.Data) + len(l.Extensions) + logEntryOverhead)
}

// addAll records the entries StoreLogs stored, under one lock: the
// append is on every write's path.
func (s *logSizes) addAll(logs []*raft.Log) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range logs {
		s.addLocked(l.Index, entryBytes(l))
	}
}

// add records entry index of n bytes. An index inside the counted range
// replaces it and everything after it, as a follower's conflicting suffix
// is replaced; one past a gap detaches what came before.
func (s *logSizes) add(index uint64, n uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(index, n)
}

func (s *logSizes) addLocked(index uint64, n uint32) {
	end := s.base + uint64(len(s.sizes))
	switch {
	case len(s.sizes) == 0:
		s.base = index
	case index < s.base:
		s.detach()
		s.base = index
	case index < end:
		s.truncate(index)
	case index > end:
		s.detach()
		s.base = index
	}
	s.sizes = append(s.sizes, n)
	s.total += uint64(n)
}

func (s *logSizes) detach() {
	if len(s.sizes) > 0 {
		s.detached += s.total
		s.detachedThrough = max(s.detachedThrough, s.base+uint64(len(s.sizes))-1)
	}
	s.sizes, s.total = nil, 0
}

// truncate drops index and everything after it.
func (s *logSizes) truncate(index uint64) {
	for i := index - s.base; i < uint64(len(s.sizes)); i++ {
		s.total -= uint64(s.sizes[i])
	}
	s.sizes = s.sizes[:index-s.base]
}

// deleteRange forgets entries lo..hi, as the store deleted them: a prefix
// (compaction) or a suffix (a follower's conflict).
func (s *logSizes) deleteRange(lo, hi uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detached > 0 && hi >= s.detachedThrough {
		s.detached, s.detachedThrough = 0, 0
	}
	if len(s.sizes) == 0 || hi < s.base {
		return
	}
	if lo > s.base {
		if lo < s.base+uint64(len(s.sizes)) {
			s.truncate(lo)
		}
		return
	}
	drop := min(hi-s.base+1, uint64(len(s.sizes)))
	for _, n := range s.sizes[:drop] {
		s.total -= uint64(n)
	}
	s.sizes = s.sizes[drop:]
	s.base += drop
}

// bytes is the log's size as counted.
func (s *logSizes) bytes() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total + s.detached
}

// newestWithin is how many of the newest entries fit in budget bytes.
func (s *logSizes) newestWithin(budget uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum, n uint64
	for i := len(s.sizes) - 1; i >= 0; i-- {
		sum += uint64(s.sizes[i])
		if sum > budget {
			break
		}
		n++
	}
	return n
}

// watchLogBytes keeps the Raft log within cfg.LogMaxBytes (or within
// minTrailingLogs entries, if those alone are larger). Every second it
// lowers TrailingLogs to the newest entries that fit in a quarter of the
// budget (never below minTrailingLogs, never above the configured value),
// and once the log is over the budget it takes a snapshot, which compacts
// the log down to those trailing entries. Entry-count snapshots go on as
// before; this only adds a trigger and trims what a snapshot keeps.
func (n *Node) watchLogBytes() {
	defer n.wg.Done()
	if n.cfg.LogMaxBytes == 0 {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			n.checkLogBytes()
		case <-n.ctx.Done():
			return
		}
	}
}

// logBytesGauge reports the Raft log's counted bytes, the number the
// budget watcher compares with --log-max-bytes.
func (n *Node) logBytesGauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "docket_raft_log_bytes",
		Help: "Bytes of the entries in this node's Raft log (data, extensions and a fixed per-entry overhead); kept under --log-max-bytes by snapshots."},
		func() float64 { return float64(n.store.sizes.bytes()) })
}

func (n *Node) checkLogBytes() {
	if n.LogFault() != nil {
		return // Raft is shut down; the store is not to be trusted
	}
	sizes := &n.store.sizes
	trailing := min(n.cfg.TrailingLogs, max(minTrailingLogs, sizes.newestWithin(n.cfg.LogMaxBytes/4)))
	rc := n.raft.ReloadableConfig()
	if rc.TrailingLogs != trailing {
		rc.TrailingLogs = trailing
		if err := n.raft.ReloadConfig(rc); err != nil {
			n.log.Warn("log byte budget: trailing logs not changed", "trailing_logs", trailing, "err", err)
			return
		}
	}
	size := sizes.bytes()
	if size <= n.cfg.LogMaxBytes {
		return
	}
	start := time.Now()
	err := n.raft.Snapshot().Error()
	switch {
	case errors.Is(err, raft.ErrNothingNewToSnapshot):
		// Everything in the log is above the last snapshot but not yet
		// applied, or the log is all trailing entries: nothing to do.
	case err != nil:
		n.log.Warn("log byte budget: snapshot failed", "log_bytes", size, "budget", n.cfg.LogMaxBytes, "err", err)
	default:
		n.log.Info("log over its byte budget: snapshot taken", "log_bytes_before", size, "log_bytes_after", sizes.bytes(),
			"budget", n.cfg.LogMaxBytes, "trailing_logs", trailing, "took", time.Since(start).Round(time.Millisecond))
	}
}
