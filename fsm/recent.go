package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/cespare/xxhash/v2"

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
// batched cycle. A map lookup answers most of them instead. DESIGN.md has
// the decision and BENCHMARKS.md its numbers.
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
//     writes and merging them after the commit was tried first: it cost a
//     second insert per write and gained no safety.
//
// Only apply reads it: FSM.GetTask, listings, snapshots and the check
// hash read Pebble, so a bug here could only ever change what apply
// reads, and the determinism tests compare a replica with the cache to
// one without (recent_test.go).
//
// Ownership: Raft's apply goroutine alone uses it (ApplyBatch). openKeyspace
// makes a new, empty one (Open, and Restore after the swap) and Close drops
// it; FSM.mu guards the pointer.
//
// Shape: two generations, O(1) and without LRU lists. Inserts go to cur;
// when cur's bytes pass the generation budget, prev = cur and cur starts
// empty. A lookup tries cur, then prev. So the cache holds between one
// and two generations of the newest writes.
const (
	// DefaultRecentRecordBytes bounds the cache: two generations of half
	// of it each. 32 MiB keeps about 130,000 entries of ~250 bytes (a
	// header, its key and its index slot), a few seconds of writes of the
	// batched cycle (~10,000 tasks/s, each written three or four times),
	// inside the 512 MiB a node may use at a 1M-task backlog.
	DefaultRecentRecordBytes = 32 << 20

	// recentMaxValue is the largest value kept. A larger body is
	// value-separated by Pebble anyway (storage's blob files), is read
	// once per claim, and would crowd out many headers.
	recentMaxValue = 1 << 10
	// recentIndexBytes is what an entry costs in its generation's index
	// beyond its bytes in the arena: a slot of a map[uint64]uint32 with
	// its share of control bytes and empty slots, rounded up.
	recentIndexBytes = 24
)

// recentRecords is the cache. The nil *recentRecords is the cache turned
// off: every method is then a no-op and every lookup a miss.
//
// A generation is pointer-free, so the garbage collector never scans it,
// and an insert allocates nothing but the arena's and the index's growth:
// entries are appended to an arena (key length, value length, key, value)
// and the index maps the key's hash to its entry's offset. A lookup
// compares the stored key, so a hash collision is a miss, never a wrong
// answer. A value handed out is valid until the next write: a rotation
// reuses the dropped generation's arena. storage copies every value it
// reads before it returns (getCopy), so no reader holds one that long.
//
// prev answers only for a hash cur has no say over. Once a key is written
// into cur, cur's index holds its hash until the generation ends: the
// key's entry, a colliding key's entry that displaced it, or recentGone
// where it was evicted. A lookup that finds the hash in cur and not the
// key misses, rather than ask prev, which may hold an older value of it.
// (A put used to remove the key from prev instead: a second index lookup
// per write, 5 % of a node's CPU in a batched enqueue.)
type recentRecords struct {
	cur, prev recentGen
	genBytes  int // a generation's budget: arena bytes plus index slots

	// hot holds the small records that every claim, heartbeat and submit
	// reads (isHotKey): the queue's catalog record, its configuration and
	// its tenant's usage, or that the key is absent. They are never
	// evicted by age, only all at once past recentHotMax entries, and
	// every write of them reaches here: applyWriter is apply's only
	// writer.
	hot map[string]hotRecord

	// headers are the decoded headers of running tasks (headers.go).
	headers headerCache

	stats recentStats
}

// hotRecord is a hot key's value, or that the key does not exist.
type hotRecord struct {
	v      []byte
	absent bool
}

// recentHotMax bounds the hot records: three per queue and tenant, so
// past it there are tens of thousands of queues, and the cache starts
// over rather than grow.
const recentHotMax = 100_000

// recentHash hashes a key for a generation's index; a test swaps it for
// one that collides often.
var recentHash = xxhash.Sum64

type recentGen struct {
	index map[uint64]uint32 // hash of the key -> offset of its entry, or recentGone
	arena []byte
}

// recentGone marks a hash whose entry cur lost to an eviction: a lookup of
// a key with that hash misses, and does not ask prev.
const recentGone = math.MaxUint32

// recentStats count what the cache did, for tests and benchmarks.
type recentStats struct {
	hits, misses       uint64 // lookups of t/ and v/ keys
	hotHits, hotMisses uint64 // lookups of c/, g/ and u/ keys
	prefetched         uint64 // t/ and v/ values a claim's prefetch read
	rotations          uint64
	clears             uint64
}

func newRecentRecords(maxBytes int) *recentRecords {
	// A generation's offsets are uint32s.
	c := &recentRecords{genBytes: min(max(maxBytes/2, 1), math.MaxUint32>>1)}
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

// isHotKey reports whether key is a c/ (catalog), g/ (queue configuration)
// or u/ (tenant usage) key: few, small, and read by nearly every command,
// each a Get through the batch, the memtables and the tables before.
func isHotKey(key []byte) bool {
	return len(key) >= 2 && key[1] == '/' && (key[0] == 'c' || key[0] == 'g' || key[0] == 'u')
}

// putHot keeps v (copied) as key's value; absent records that it has none.
func (c *recentRecords) putHot(key, v []byte, absent bool) {
	if c == nil {
		return
	}
	if len(c.hot) >= recentHotMax {
		if _, ok := c.hot[string(key)]; !ok {
			clear(c.hot)
		}
	}
	c.hot[string(key)] = hotRecord{v: append([]byte(nil), v...), absent: absent}
}

// dropHot forgets the hot keys in [start, end): a range delete, which
// none of apply's ranges is today, but which must not leave a value
// behind.
func (c *recentRecords) dropHot(start, end []byte) {
	if c == nil {
		return
	}
	for k := range c.hot {
		if k >= string(start) && k < string(end) {
			delete(c.hot, k)
		}
	}
}

// find returns the value of key, whose hash is h, if g holds it.
func (g *recentGen) find(h uint64, key []byte) ([]byte, bool) {
	v, ok, _ := g.lookup(h, key)
	return v, ok
}

// lookup is key's value in g (ok), and whether g's index holds key's hash
// at all (claimed): an entry of key or of a colliding key, or recentGone.
func (g *recentGen) lookup(h uint64, key []byte) (v []byte, ok, claimed bool) {
	off, claimed := g.index[h]
	if !claimed || off == recentGone {
		return nil, false, claimed
	}
	e := g.arena[off:]
	kl, vl := int(binary.LittleEndian.Uint16(e)), int(binary.LittleEndian.Uint16(e[2:]))
	if !bytes.Equal(e[4:4+kl], key) {
		return nil, false, true
	}
	return e[4+kl : 4+kl+vl : 4+kl+vl], true, true
}

func (g *recentGen) bytes() int { return len(g.arena) + recentIndexBytes*len(g.index) }

func (c *recentRecords) get(key []byte) ([]byte, bool) {
	h := recentHash(key)
	if v, ok, claimed := c.cur.lookup(h, key); ok || claimed {
		return v, ok
	}
	return c.prev.find(h, key)
}

// has says whether the cache would answer key.
func (c *recentRecords) has(key []byte) bool {
	_, ok := c.get(key)
	return ok
}

// put keeps v as key's value, or forgets key when v is too large to keep.
// v is copied.
func (c *recentRecords) put(key []byte, v []byte) {
	if len(v) > recentMaxValue || len(key) > math.MaxUint16 {
		c.evict(key)
		return
	}
	h := recentHash(key)
	if c.cur.arena == nil {
		// Room for the whole generation at once: growing by doubling
		// copied it and faulted its pages in again at every step. The
		// pages of the unused tail are not touched, so a small FSM costs
		// little memory.
		c.cur.arena = make([]byte, 0, c.genBytes+2*recentMaxValue)
	}
	off := len(c.cur.arena)
	c.cur.arena = binary.LittleEndian.AppendUint16(c.cur.arena, uint16(len(key)))
	c.cur.arena = binary.LittleEndian.AppendUint16(c.cur.arena, uint16(len(v)))
	c.cur.arena = append(append(c.cur.arena, key...), v...)
	c.cur.index[h] = uint32(off)
	if c.cur.bytes() > c.genBytes {
		c.rotate()
	}
}

// rotate makes cur the older generation and drops the older one. The
// dropped generation's index and arena become the new cur, emptied: once
// both generations have grown, rotating allocates nothing (a fresh 16 MiB
// arena cost page faults and zeroing).
func (c *recentRecords) rotate() {
	old := c.prev
	c.prev = c.cur
	clear(old.index)
	if old.index == nil {
		old.index = make(map[uint64]uint32, len(c.prev.index))
	}
	c.cur = recentGen{index: old.index, arena: old.arena[:0]}
	c.stats.rotations++
}

// recentBytesAhead is what the cache takes in per task queued ahead of a
// new one before a claim reaches it: that task's record and body, and
// the records its claim and submit write.
const recentBytesAhead = 1 << 10

// keepsNew reports whether a new task's record and body are worth keeping
// when ahead tasks are queued before it: a claim reads them only after
// those, and past about a generation of their writes the entries are gone
// by then. Keeping them cost a batched enqueue 9 % of a node's CPU (the
// index's map writes) for a backlog no claim would find in the cache.
// Leaving them out needs no eviction: a new task's keys were never
// written, so no older value of them can be held.
func (c *recentRecords) keepsNew(ahead uint64) bool {
	return c == nil || ahead < uint64(c.genBytes)/recentBytesAhead
}

// evict forgets key: deleted, or written with a value too large to keep.
// A hash neither generation holds already misses, so it is left alone: a
// claim of an old backlog evicts the pending record of every task it
// takes, none of which the cache ever held, and a mark for each grew cur's
// index by a slot a task (4.6 % of a 1M drain's apply in map writes, and
// the index unbounded until the next put rotated it).
func (c *recentRecords) evict(key []byte) {
	h := recentHash(key)
	if _, ok := c.cur.index[h]; !ok {
		if _, ok := c.prev.index[h]; !ok {
			return
		}
	}
	c.cur.index[h] = recentGone
}

// clear empties the cache: after an apply that failed, whose writes the
// cache holds although Pebble never took them (or may have).
func (c *recentRecords) clear() {
	if c == nil {
		return
	}
	c.cur = recentGen{index: map[uint64]uint32{}}
	c.prev = recentGen{}
	c.hot = map[string]hotRecord{}
	c.headers.clear()
	c.stats.clears++
}

// applyWriter is apply's only writer (txn.b): the indexed batch, with
// every write of a hot key (isHotKey) copied into the cache as it goes,
// so that a later read in the batch, or in a later batch, is answered
// from memory. It has no method that could write around it. A nil c is
// the cache turned off.
type applyWriter struct {
	b *pebble.Batch
	c *recentRecords
	// d is the checkpoint window's dirty records (checkpoint.go): with
	// it, task records go there instead of into the batch. nil without
	// a window.
	d *dirtyRecords
}

func (w *applyWriter) Set(key, value []byte, o *pebble.WriteOptions) error {
	if w.d != nil {
		w.d.fam.mark(key[0])
		if isRecordKey(key) {
			w.d.set(key, value)
			return nil
		}
	}
	if err := w.b.Set(key, value, o); err != nil {
		return err
	}
	if isHotKey(key) {
		w.c.putHot(key, value, false)
	}
	return nil
}

func (w *applyWriter) Delete(key []byte, o *pebble.WriteOptions) error {
	if w.d != nil {
		w.d.fam.mark(key[0])
		if isRecordKey(key) {
			w.d.delete(key)
			return nil
		}
	}
	if err := w.b.Delete(key, o); err != nil {
		return err
	}
	if isHotKey(key) {
		w.c.putHot(key, nil, true)
	}
	return nil
}

// DeleteRange deletes [start, end) and forgets the hot keys inside it.
func (w *applyWriter) DeleteRange(start, end []byte, o *pebble.WriteOptions) error {
	if w.d != nil && overRecords(start, end) {
		// The dirty records would outlive the range's delete. No rule
		// deletes records by range; this keeps one from doing it quietly.
		return fmt.Errorf("delete range [%q, %q): task records inside a checkpoint window", start, end)
	}
	if w.d != nil {
		// Every family the range could hold: ranges are rare (a latch).
		for c := int(start[0]); c <= int(end[0]) && c < 256; c++ {
			w.d.fam.mark(byte(c))
		}
	}
	if err := w.b.DeleteRange(start, end, o); err != nil {
		return err
	}
	w.c.dropHot(start, end)
	return nil
}

// recentWriter writes the apply batch and the cache together. putTask
// and deleteTask write through it.
type recentWriter struct {
	b applyWriter
	c *recentRecords
}

func (w recentWriter) Set(key, value []byte, o *pebble.WriteOptions) error {
	if err := w.b.Set(key, value, o); err != nil {
		return err
	}
	if isRecordKey(key) {
		w.c.put(key, value) // copied into the arena
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
	if isHotKey(key) {
		return r.getHot(key)
	}
	if isRecordKey(key) {
		if v, ok := r.c.get(key); ok {
			r.c.stats.hits++
			return v, noClose{}, nil
		}
		r.c.stats.misses++
	}
	return r.inner.Get(key)
}

// getHot answers a hot key from the cache, or reads it through the batch
// and keeps what it found, its absence included.
func (r recentReader) getHot(key []byte) ([]byte, interface{ Close() error }, error) {
	if e, ok := r.c.hot[string(key)]; ok {
		r.c.stats.hotHits++
		if e.absent {
			return nil, nil, pebble.ErrNotFound
		}
		return e.v, noClose{}, nil
	}
	r.c.stats.hotMisses++
	v, closer, err := r.inner.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		r.c.putHot(key, nil, true)
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, err
	}
	r.c.putHot(key, v, false)
	return v, closer, nil
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
	tx.b.c = c
	tx.w = recentWriter{b: tx.b, c: c}
	tx.r = recentReader{inner: tx.r, c: c}
}
