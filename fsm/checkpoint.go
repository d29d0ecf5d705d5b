package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dockethq/docket/storage"
)

// The checkpoint window: apply's writes reach Pebble in one batch every
// few hundred or thousand entries instead of one batch per apply segment,
// and the task records written in between reach it once, as their last
// value. A task enqueued, claimed and submitted inside one window costs
// Pebble one record write instead of three; a drained task's claim and
// submit, one instead of two.
//
// What a window holds (pendingCheckpoint):
//   - b, the indexed apply batch, left open across segments: every write
//     but the task records' (catalog, configuration, usage, keys, m/),
//     each segment's m/applied and m/now last;
//   - dirty, the task records (t/ and v/) written since the window
//     opened: the last value of each key, or that it was deleted.
//
// Between segments b and dirty together are the state at the applied
// index, whole. A checkpoint writes dirty into b, in key order, and
// commits it: Pebble then holds that state, with its index in m/applied,
// and the rest of "One log" (DESIGN.md) holds as it did: the durable
// applied index is the last checkpoint's that a flush wrote, and Raft
// removes no entry above it, because everything that lets Raft remove
// entries (Snapshot, Restore, Close) checkpoints first.
//
// A checkpoint is taken when the window reaches Options.CheckpointEntries
// entries or CheckpointBytes of dirty records; at a Check entry, so the
// hash covers the Check's index; before Snapshot, Backup and Close; and
// before a read outside apply that iterates (view, orderView when its
// caller reads Pebble, an iterator of reader over a family the window
// wrote). A point read looks through the window instead (windowReader).
// So a reader sees every entry whose result it was given. Iterating reads
// are rare on the data path (the leader's loops when they find work,
// listings, Stats), so they bound a window in time on the leader; a
// follower's windows end by size.
//
// The window changes when Pebble is written, never what: the keyspace
// after a checkpoint is the keyspace a per-segment commit would have left
// at that index, so replicas with different windows hash alike at every
// Check and no feature level is involved (Test_CheckpointWindowKeepsTheKeyspace).
// Its price is replay: a crash loses up to a window more of applied
// entries, which Raft's log still holds and hands over again at the next
// start.
//
// A segment that fails inside a window that already held entries leaves
// state in memory Pebble never took and that cannot be taken apart: the
// FSM latches a fault (errWindowLost) and applies nothing more; the next
// start replays from the last checkpoint.
//
// Ownership: pendingCheckpoint is guarded by the ready order's lock,
// which apply holds for a whole segment and a reader takes to checkpoint.

// DefaultCheckpointBytes bounds the dirty records of a window when
// Options.CheckpointBytes is 0.
const DefaultCheckpointBytes = 16 << 20

// errWindowLost is the fault of a segment that failed after earlier
// segments of its window applied: their effects were in memory only.
var errWindowLost = errors.New("apply failed inside a checkpoint window: the state since the last checkpoint is lost from memory; restart the node to replay it from the Raft log")

// pendingCheckpoint is an open window (see above).
type pendingCheckpoint struct {
	b       *pebble.Batch
	dirty   dirtyRecords
	entries int // log entries applied into the window
}

// dirtyRecords is the last write of each task record and body of a
// window: a value, or gone for a delete. Values are copied into one arena,
// so a write allocates only the arena's growth and, for a key new to the
// window, the map's; a rewrite leaves its old copy behind until the
// window ends, which bytes counts.
type dirtyRecords struct {
	fam   *keyFamilies // the FSM's, marked by applyWriter for every key it writes
	m     map[string]dirtyRecord
	arena []byte
	bytes int
}

type dirtyRecord struct {
	off, n uint32
	gone   bool
}

func (d *dirtyRecords) set(key, value []byte) {
	e := dirtyRecord{off: uint32(len(d.arena)), n: uint32(len(value))}
	d.arena = append(d.arena, value...)
	d.bytes += len(value)
	d.put(key, e)
}

func (d *dirtyRecords) delete(key []byte) { d.put(key, dirtyRecord{gone: true}) }

// put records key's last write; a key new to the window adds its bytes.
func (d *dirtyRecords) put(key []byte, e dirtyRecord) {
	if d.m == nil {
		d.m = map[string]dirtyRecord{}
	}
	if _, ok := d.m[string(key)]; !ok {
		d.bytes += len(key)
	}
	d.m[string(key)] = e
}

// get answers a key the window wrote, as a Reader's Get would: its value
// (valid until the window ends) or pebble.ErrNotFound for a delete. ok is
// false for a key the window did not write.
func (d *dirtyRecords) get(key []byte) (v []byte, ok bool, err error) {
	e, ok := d.m[string(key)]
	switch {
	case !ok:
		return nil, false, nil
	case e.gone:
		return nil, true, pebble.ErrNotFound
	}
	return d.arena[e.off : e.off+e.n : e.off+e.n], true, nil
}

// has reports whether the window wrote key.
func (d *dirtyRecords) has(key []byte) bool {
	_, ok := d.m[string(key)]
	return ok
}

// writeTo writes every dirty record into b in key order.
func (d *dirtyRecords) writeTo(b *pebble.Batch) error {
	keys := make([]string, 0, len(d.m))
	for k := range d.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e := d.m[k]
		var err error
		if e.gone {
			err = b.Delete(unsafe.Slice(unsafe.StringData(k), len(k)), nil)
		} else {
			err = b.Set(unsafe.Slice(unsafe.StringData(k), len(k)), d.arena[e.off:e.off+e.n], nil)
		}
		if err != nil {
			return fmt.Errorf("checkpoint %q: %w", k, err)
		}
	}
	return nil
}

// dirtyReader answers the task records a window wrote from it, and every
// other read from the apply batch.
type dirtyReader struct {
	inner storage.Reader
	d     *dirtyRecords
}

func (r dirtyReader) Get(key []byte) ([]byte, interface{ Close() error }, error) {
	if isRecordKey(key) {
		if v, ok, err := r.d.get(key); ok {
			return v, noClose{}, err
		}
	}
	return r.inner.Get(key)
}

// NewIter reads the batch and Pebble only. No iterator of apply's ranges
// over task records except a claim's prefetch, which leaves the heads the
// window wrote to Get (prefetch.go).
func (r dirtyReader) NewIter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	return r.inner.NewIter(o)
}

// useDirty makes tx write task records into the window's dirty set and
// read them from it. It comes before useRecent, which wraps both.
func (tx *txn) useDirty(d *dirtyRecords) {
	tx.b.d = d
	tx.w = &tx.b
	tx.r = dirtyReader{inner: tx.r, d: d}
}

// windowed reports whether this FSM keeps checkpoint windows.
func (f *FSM) windowed() bool { return f.opts.CheckpointEntries > 1 }

// windowFull reports whether the open window is due for its checkpoint.
func (f *FSM) windowFull(p *pendingCheckpoint) bool {
	limit := f.opts.CheckpointBytes
	if limit <= 0 {
		limit = DefaultCheckpointBytes
	}
	return p.entries >= f.opts.CheckpointEntries || p.dirty.bytes >= limit
}

// checkpointLocked commits the open window, if any. The caller holds the
// ready order's lock and f.mu (read), and no apply segment is running.
func (f *FSM) checkpointLocked() {
	p := f.pend
	if p == nil {
		return
	}
	f.pend = nil
	if p.entries == 0 {
		_ = p.b.Close() // an empty window: nothing to write
		return
	}
	// The window's batch is indexed, for apply to read its own writes; the
	// checkpoint copies it into a plain one, which takes the records
	// without an index insert each, and commits that.
	// Sized up front: growing a batch of megabytes by doubling copied it
	// over and over (a tenth of a windowed cycle's CPU in process).
	c := f.db.NewBatchWithSize(len(p.b.Repr()) + p.dirty.bytes + 16*len(p.dirty.m))
	err := c.Apply(p.b, nil)
	if err == nil {
		err = p.dirty.writeTo(c)
	}
	if err != nil {
		panic(fmt.Sprintf("docket fsm: checkpoint at %d: %v", f.applied.Load(), err))
	}
	f.written.Add(uint64(c.Len()))
	if err := c.Commit(pebble.NoSync); err != nil {
		panic(fmt.Sprintf("docket fsm: commit checkpoint at %d: %v", f.applied.Load(), err))
	}
	f.windowKeys.clear() // after the commit: Pebble holds them now
	// The next window reuses the map's buckets and the arena: growing
	// them again each window cost more than the writes they hold.
	clear(p.dirty.m)
	p.dirty.arena, p.dirty.bytes = p.dirty.arena[:0], 0
	f.spare = p.dirty
	if err := errors.Join(c.Close(), p.b.Close()); err != nil {
		panic(fmt.Sprintf("docket fsm: close checkpoint at %d: %v", f.applied.Load(), err))
	}
	f.checkpoints.Add(1)
}

// checkpoint commits the open window for a caller outside apply that is
// about to read Pebble. The caller holds f.mu (read) with f.db open.
func (f *FSM) checkpoint() {
	if !f.windowed() {
		return
	}
	o := f.ready
	o.mu.Lock()
	defer o.mu.Unlock()
	f.checkpointLocked()
}

// dropWindow abandons the open window (a Restore replaces the keyspace).
// The caller holds f.mu.
func (f *FSM) dropWindow() {
	if f.pend != nil {
		_ = f.pend.b.Close() // abandoning it; nothing of it is wanted
		f.pend = nil
	}
}

// Checkpoints counts the checkpoints this FSM committed (windowed only).
func (f *FSM) Checkpoints() uint64 { return f.checkpoints.Load() }

// overRecords reports whether [start, end) holds any t/ or v/ key.
func overRecords(start, end []byte) bool {
	for _, p := range [][]byte{storage.TaskPrefix(), storage.BodyPrefix()} {
		if bytes.Compare(start, storage.PrefixEnd(p)) < 0 && bytes.Compare(end, p) > 0 {
			return true
		}
	}
	return false
}

// windowReader is reader()'s answer while checkpoint windows are on: a
// point read looks through the open window under the ready order's lock
// (the dirty records, then the indexed batch over Pebble), so the
// authentication of every call (TokenByHash) does not end the window;
// an iterator checkpoints first and reads Pebble. The caller holds f.mu
// (read).
type windowReader struct{ f *FSM }

func (r windowReader) Get(key []byte) ([]byte, interface{ Close() error }, error) {
	if len(key) > 0 && !r.f.windowKeys.has(key[0]) {
		// The window wrote no key of this family (tokens, mostly): Pebble
		// holds its newest value, and the read need not wait for the
		// segment that apply is running.
		v, closer, err := r.f.db.Get(key)
		return v, closer, err
	}
	o := r.f.ready
	o.mu.Lock()
	defer o.mu.Unlock()
	p := r.f.pend
	if p == nil {
		v, closer, err := r.f.db.Get(key)
		return v, closer, err
	}
	if isRecordKey(key) {
		if v, ok, err := p.dirty.get(key); ok {
			return slices.Clone(v), noClose{}, err
		}
	}
	// The batch's values live until its next write, which waits for this
	// lock: copy before letting go.
	v, closer, err := p.b.Get(key)
	if err != nil {
		return nil, nil, err
	}
	v = slices.Clone(v)
	if err := closer.Close(); err != nil {
		return nil, nil, err
	}
	return v, noClose{}, nil
}

func (r windowReader) NewIter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	if o == nil || len(o.LowerBound) == 0 || len(o.UpperBound) == 0 ||
		o.LowerBound[0] != o.UpperBound[0] || r.f.windowKeys.has(o.LowerBound[0]) {
		r.f.checkpoint() // the window may hold keys of the range
	}
	return r.f.db.NewIter(o)
}

// keyFamilies marks the first bytes of the keys an open window wrote, so
// that a point read of another family (windowReader) skips the window and
// its lock. Apply sets a mark before the write it stands for, and a
// checkpoint clears the marks only after its commit, so a read that finds
// no mark finds Pebble current for its key.
type keyFamilies [4]atomic.Uint64

func (k *keyFamilies) mark(b byte) {
	w, bit := &k[b>>6], uint64(1)<<(b&63)
	if w.Load()&bit == 0 {
		w.Or(bit)
	}
}

func (k *keyFamilies) has(b byte) bool { return k[b>>6].Load()&(uint64(1)<<(b&63)) != 0 }

func (k *keyFamilies) clear() {
	for i := range k {
		k[i].Store(0)
	}
}
