package fsm

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dockethq/docket/storage"
)

// The recent-record cache: the exact bytes apply most recently wrote
// for task records (t/<id>) and small task bodies (v/<id>), kept so that
// apply's next read of them skips Pebble. Nearly every task read of the
// consumer path is of a record written moments before (enqueue, then
// claim, then heartbeat and submit within seconds), and each such read was
// a Get on the indexed apply batch: a merged lookup over the batch, both
// memtables and the sstables, about an eighth of the leader's CPU in the
// batched cycle. A map lookup answers most of them instead. See DESIGN.md
// for the decision and its numbers.
//
// It is an accelerator only: whatever it answers, the apply batch would
// have answered too (Pebble plus the batch's own writes).
//   - Every write and delete of a t/ or v/ key goes through txn.putTask
//     and txn.deleteTask, which write through recentWriter: the batch and
//     the cache together. So a later command of the batch reads its
//     predecessors' writes from either, alike.
//   - A delete, or a value too large to keep, evicts the key; the read
//     then goes to the batch.
//   - The cache holds a batch's writes before Pebble does, as the indexed
//     batch does. A batch that never commits (apply panicked, or its
//     commit failed) leaves the whole cache cleared (applySegment): it
//     cannot tell what Pebble took. Such a panic stops the node unless its
//     owner recovers, so clearing costs nothing that matters. Staging the
//     writes and merging them after the commit was measured too: it cost
//     a second map insert per write and gained no safety.
//
// Only apply reads it: FSM.GetTask, listings, snapshots and the check
// hash read Pebble, so a bug here could only ever change what apply
// reads, and the determinism tests compare a replica with the cache to
// one without (recent_test.go).
//
// Ownership: Raft's apply goroutine alone uses it (ApplyBatch), like the
// idempotency filter. openKeyspace makes a new, empty one (Open, and
// Restore after the swap) and Close drops it; FSM.mu guards the pointer.
//
// Shape: two generations of maps, O(1) and without LRU lists. Inserts go
// to cur; when cur's bytes pass the generation budget, prev = cur and cur
// starts empty. A lookup tries cur, then prev. So the cache holds between
// one and two generations of the newest writes.
const (
	// DefaultRecentRecordBytes bounds the cache: two generations of half
	// of it each. 32 MiB keeps about 100,000 headers of ~200 bytes, a few
	// seconds of writes of the batched cycle (~10,000 tasks/s, each
	// written three or four times), inside the 512 MiB a node may use at
	// a 1M-task backlog.
	DefaultRecentRecordBytes = 32 << 20

	// recentMaxValue is the largest value kept. A larger body is
	// value-separated by Pebble anyway (storage's blob files), is read
	// once per claim, and would crowd out many headers.
	recentMaxValue = 1 << 10
	// recentEntryOverhead is what an entry costs beyond its key and value
	// bytes: a map slot, a string header and a slice header, rounded up.
	recentEntryOverhead = 96
)

// recentRecords is the cache. The nil *recentRecords is the cache turned
// off: every method is then a no-op and every lookup a miss.
type recentRecords struct {
	cur, prev map[string][]byte
	curBytes  int
	genBytes  int // a generation's budget

	stats recentStats
}

// recentStats count what the cache did, for tests and benchmarks.
type recentStats struct {
	hits, misses uint64 // lookups of t/ and v/ keys
	rotations    uint64
	clears       uint64
}

func newRecentRecords(maxBytes int) *recentRecords {
	c := &recentRecords{genBytes: max(maxBytes/2, 1)}
	c.clear()
	return c
}

// openRecent makes the cache of a freshly opened keyspace: nil when
// Options turned it off.
func (f *FSM) openRecent() *recentRecords {
	switch {
	case f.opts.RecentRecordBytes < 0:
		return nil
	case f.opts.RecentRecordBytes == 0:
		return newRecentRecords(DefaultRecentRecordBytes)
	}
	return newRecentRecords(f.opts.RecentRecordBytes)
}

// isRecordKey reports whether key is a t/ or v/ key: the keys the cache
// may hold, and the keys only putTask and deleteTask write.
func isRecordKey(key []byte) bool {
	return len(key) >= 2 && key[1] == '/' && (key[0] == 't' || key[0] == 'v')
}

func (c *recentRecords) get(key []byte) ([]byte, bool) {
	if v, ok := c.cur[string(key)]; ok {
		return v, true
	}
	v, ok := c.prev[string(key)]
	return v, ok
}

// put keeps v as key's value, or forgets key when v is too large to keep.
func (c *recentRecords) put(key []byte, v []byte) {
	if len(v) > recentMaxValue {
		c.evict(key)
		return
	}
	k := string(key)
	// A key written again is counted again: the generation then rotates a
	// little early, which costs a few hits and saves a lookup per write.
	c.cur[k] = v
	c.curBytes += len(k) + len(v) + recentEntryOverhead
	if c.curBytes > c.genBytes {
		// The next generation starts at the size the last one reached, so
		// that it does not grow (and rehash) step by step.
		c.prev, c.cur, c.curBytes = c.cur, make(map[string][]byte, len(c.cur)), 0
		c.stats.rotations++
	}
}

// evict forgets key: deleted, or written with a value too large to keep.
func (c *recentRecords) evict(key []byte) {
	delete(c.cur, string(key))
	delete(c.prev, string(key))
}

// clear empties the cache: after an apply that failed, whose writes the
// cache holds although Pebble never took them (or may have).
func (c *recentRecords) clear() {
	if c == nil {
		return
	}
	c.cur, c.prev, c.curBytes = map[string][]byte{}, map[string][]byte{}, 0
	c.stats.clears++
}

// recentWriter writes the apply batch and the cache together. putTask
// and deleteTask write through it.
type recentWriter struct {
	b *pebble.Batch
	c *recentRecords
}

func (w recentWriter) Set(key, value []byte, o *pebble.WriteOptions) error {
	if err := w.b.Set(key, value, o); err != nil {
		return err
	}
	if isRecordKey(key) {
		// The batch copied value; the cache keeps its own copy, since a
		// body's bytes belong to the command and, later, to its answer.
		w.c.put(key, bytes.Clone(value))
	}
	return nil
}

func (w recentWriter) Delete(key []byte, o *pebble.WriteOptions) error {
	if err := w.b.Delete(key, o); err != nil {
		return err
	}
	if isRecordKey(key) {
		w.c.evict(key)
	}
	return nil
}

// recentReader is apply's reader when the cache is on: a record key the
// cache holds is answered from it, every other read by the batch.
type recentReader struct {
	inner storage.Reader // the indexed apply batch
	c     *recentRecords
}

// noClose is the closer of a value served from memory.
type noClose struct{}

func (noClose) Close() error { return nil }

func (r recentReader) Get(key []byte) ([]byte, interface{ Close() error }, error) {
	if isRecordKey(key) {
		if v, ok := r.c.get(key); ok {
			r.c.stats.hits++
			return v, noClose{}, nil
		}
		r.c.stats.misses++
	}
	return r.inner.Get(key)
}

func (r recentReader) NewIter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	return r.inner.NewIter(o)
}

// useRecent makes tx read and write task records through c; a nil c
// leaves it on the batch alone.
func (tx *txn) useRecent(c *recentRecords) {
	if c == nil {
		return
	}
	tx.w = recentWriter{b: tx.b, c: c}
	tx.r = recentReader{inner: tx.r, c: c}
}
