package fsm

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dockethq/docket/storage"
)

// The recent-record cache: the exact bytes apply most recently committed
// for task records (t/<id>) and small task bodies (v/<id>), kept so that
// apply's next read of them skips Pebble. Nearly every task read of the
// consumer path is of a record written moments before (enqueue, then
// claim, then heartbeat and submit within seconds), and each such read was
// a Get on the indexed apply batch: a merged lookup over the batch, both
// memtables and the sstables, about an eighth of the leader's CPU in the
// batched cycle. A map lookup answers most of them instead. See DESIGN.md
// for the decision and its numbers.
//
// It is an accelerator only, and holds exactly what Pebble holds:
//   - every write and delete of a t/ or v/ key goes through txn.putTask
//     and txn.deleteTask, which write through recentWriter; it stages the
//     key in the open txn (recentStage) besides writing the batch;
//   - a read (recentReader) takes the txn's staged write first, so a
//     command sees the batch's own earlier writes, then the cache, then
//     the batch, which is Pebble plus the batch;
//   - the staged writes enter the cache only after the batch committed;
//     an apply that panics before that clears the whole cache, since it
//     cannot tell how far it got (applySegment);
//   - a delete, or a value too large to keep, evicts the key.
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
	hits, misses uint64 // lookups of t/ and v/ keys not staged in the txn
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

// clear empties the cache: after an apply that may or may not have
// committed.
func (c *recentRecords) clear() {
	if c == nil {
		return
	}
	c.cur, c.prev, c.curBytes = map[string][]byte{}, map[string][]byte{}, 0
	c.stats.clears++
}

// merge installs the writes of a committed batch.
func (c *recentRecords) merge(s *recentStage) {
	if c == nil || s == nil {
		return
	}
	for _, k := range s.order {
		w := s.writes[k]
		if !w.keep {
			delete(c.cur, k)
			delete(c.prev, k)
			continue
		}
		if old, ok := c.cur[k]; ok {
			c.curBytes -= len(k) + len(old) + recentEntryOverhead
		}
		c.cur[k] = w.v
		c.curBytes += len(k) + len(w.v) + recentEntryOverhead
		if c.curBytes > c.genBytes {
			c.prev, c.cur, c.curBytes = c.cur, map[string][]byte{}, 0
			c.stats.rotations++
		}
	}
}

// recentStage is one txn's writes of record keys, by key, until its
// batch commits.
type recentStage struct {
	c      *recentRecords
	writes map[string]stagedRecord
	order  []string // the keys of writes, in the order first written
}

// stagedRecord is a staged write. keep: v is the value written, which the
// cache takes at the commit. Otherwise the key was deleted or its value is
// too large to keep: a read goes to the batch, and the commit evicts it.
type stagedRecord struct {
	v    []byte
	keep bool
}

func newRecentStage(c *recentRecords) *recentStage {
	return &recentStage{c: c, writes: map[string]stagedRecord{}}
}

// stage records a write; merge takes the keys in this order, so that
// which entries a rotation keeps does not depend on map order.
func (s *recentStage) stage(key []byte, w stagedRecord) {
	if _, ok := s.writes[string(key)]; !ok {
		s.order = append(s.order, string(key))
	}
	s.writes[string(key)] = w
}

// recentWriter writes a Pebble batch and stages the record keys it
// writes. putTask and deleteTask write through it.
type recentWriter struct {
	b *pebble.Batch
	s *recentStage
}

func (w recentWriter) Set(key, value []byte, o *pebble.WriteOptions) error {
	if err := w.b.Set(key, value, o); err != nil {
		return err
	}
	if isRecordKey(key) {
		// The batch copied value; the cache keeps its own copy, since a
		// body's bytes belong to the command and, later, to its answer.
		sr := stagedRecord{}
		if len(value) <= recentMaxValue {
			sr = stagedRecord{v: bytes.Clone(value), keep: true}
		}
		w.s.stage(key, sr)
	}
	return nil
}

func (w recentWriter) Delete(key []byte, o *pebble.WriteOptions) error {
	if err := w.b.Delete(key, o); err != nil {
		return err
	}
	if isRecordKey(key) {
		w.s.stage(key, stagedRecord{})
	}
	return nil
}

// recentReader is apply's reader when the cache is on: a record key is
// answered by the txn's staged write, then by the cache, then by the batch;
// every other key by the batch.
type recentReader struct {
	inner storage.Reader // the indexed apply batch
	s     *recentStage
}

// noClose is the closer of a value served from memory.
type noClose struct{}

func (noClose) Close() error { return nil }

func (r recentReader) Get(key []byte) ([]byte, interface{ Close() error }, error) {
	if isRecordKey(key) {
		if w, ok := r.s.writes[string(key)]; ok {
			if w.keep {
				return w.v, noClose{}, nil
			}
			return r.inner.Get(key)
		}
		if v, ok := r.s.c.get(key); ok {
			r.s.c.stats.hits++
			return v, noClose{}, nil
		}
		r.s.c.stats.misses++
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
	tx.recent = newRecentStage(c)
	tx.w = recentWriter{b: tx.b, s: tx.recent}
	tx.r = recentReader{inner: tx.r, s: tx.recent}
}
