package raftlog

import (
	"sync"

	"github.com/hashicorp/raft"
)

// logEntryOverhead is what an entry costs in the store beyond its data and
// extensions (index, term, type, time and the store's own framing), so a
// log of many tiny entries is not counted as nearly empty.
const logEntryOverhead = 48

// MinTrailingLogs is the fewest entries the byte budget leaves after a
// snapshot: a follower a moment behind still catches up from the log.
const MinTrailingLogs = 64

// Sizes counts the bytes of the entries in the log, by index, as the
// checked store writes, reads at start and deletes them. Raft triggers
// snapshots by entry count only, and keeps TrailingLogs entries after one;
// with large entries (1 MiB payloads, or the leader's coalesced batches of
// hundreds of KiB under load) both let the log grow to many GiB. The node's
// budget watcher (watchLogBytes) reads these counts.
type Sizes struct {
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
func (s *Sizes) addAll(logs []*raft.Log) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range logs {
		s.addLocked(l.Index, entryBytes(l))
	}
}

// add records entry index of n bytes. An index inside the counted range
// replaces it and everything after it, as a follower's conflicting suffix
// is replaced; one past a gap detaches what came before.
func (s *Sizes) add(index uint64, n uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(index, n)
}

func (s *Sizes) addLocked(index uint64, n uint32) {
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

func (s *Sizes) detach() {
	if len(s.sizes) > 0 {
		s.detached += s.total
		s.detachedThrough = max(s.detachedThrough, s.base+uint64(len(s.sizes))-1)
	}
	s.sizes, s.total = nil, 0
}

// truncate drops index and everything after it.
func (s *Sizes) truncate(index uint64) {
	for i := index - s.base; i < uint64(len(s.sizes)); i++ {
		s.total -= uint64(s.sizes[i])
	}
	s.sizes = s.sizes[:index-s.base]
}

// deleteRange forgets entries lo..hi, as the store deleted them: a prefix
// (compaction) or a suffix (a follower's conflict).
func (s *Sizes) deleteRange(lo, hi uint64) {
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
func (s *Sizes) Bytes() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total + s.detached
}

// newestWithin is how many of the newest entries fit in budget bytes.
func (s *Sizes) NewestWithin(budget uint64) uint64 {
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
