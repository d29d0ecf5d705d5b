package fsm

import (
	"fmt"
	"log/slog"

	"github.com/cespare/xxhash/v2"

	"github.com/dockethq/docket/storage"
)

// The idempotency filter: an in-memory multiset of 32-bit fingerprints of
// the live i/ keys, consulted before Pebble on every idempotency-key
// lookup of an apply. Almost every enqueue carries a fresh random key, and
// in Pebble a miss is the most expensive Get there is: it walks both
// memtables' skiplists and seeks into L6, whose bloom filters Get never
// reads. The filter answers "absent" from one cache line instead. See
// DESIGN.md for the decision and its memory cost.
//
// It is an accelerator only. "Absent" is certain, because every live key's
// fingerprint is in the multiset; "maybe" sends the lookup to Pebble, whose
// answer is what the rule uses. So the keyspace and every answer are the
// same with the filter on, off or overflowed, on every replica.
const (
	// DefaultIdemFilterBytes bounds the filter's table: 16 Mi slots, room
	// for 12.5 M live keys. Past that the filter switches itself off.
	DefaultIdemFilterBytes = 64 << 20

	idemSlotBytes = 4
	// idemMinSlots keeps a small FSM's table at 4 KiB.
	idemMinSlots = 1 << 10
	// The table grows when an insert would take it past 3/4 full (linear
	// probing slows sharply beyond) and is rebuilt half full; it shrinks
	// back to half full at a commit that leaves it less than 1/8 full.
	idemMaxLoadNum, idemMaxLoadDen = 3, 4
	idemShrinkDen                  = 8
)

// idemFilter is the multiset. Its table is open addressing with linear
// probing over uint32 fingerprints, 0 marking an empty slot. A key's home
// slot is derived from its fingerprint alone, so the table can be resized
// without reading Pebble.
//
// Adds take effect at once: a later command of the same apply batch must
// not be told "absent" for a key an earlier one set. Removes wait for the
// batch's commit: until then Pebble still holds the key. A batch that never
// commits (ApplyBatch panicked) has its adds taken back by the next one, so
// the multiset stays exactly the committed keys' fingerprints.
//
// Only Raft's apply goroutine uses it (ApplyBatch, Restore), or Open
// before the FSM is shared; FSM.mu guards the pointer swap.
type idemFilter struct {
	log      *slog.Logger
	maxSlots int

	slots []uint32 // nil: off, every lookup asks Pebble
	used  int      // fingerprints in slots
	// live is the number of i/ keys in the committed keyspace plus those
	// added by the open batch. It is kept while off, to know when the
	// table fits again.
	live    int
	added   []uint32 // fingerprints of keys the open batch set
	removed []uint32 // fingerprints of keys the open batch deleted
	fps     []uint32 // a build's fingerprints, from keyScan to built
	// rebuild asks the next commit to rebuild from Pebble: set when the
	// table overflowed, or found itself inconsistent.
	rebuild bool

	stats idemStats
}

// idemStats count what the filter did, for tests and benchmarks.
type idemStats struct {
	skipped   uint64 // lookups answered "absent" without Pebble
	asked     uint64 // lookups sent to Pebble
	rebuilds  uint64 // scans of the i/ range
	anomalies uint64 // removes of a fingerprint the table did not hold
}

func newIdemFilter(maxBytes int, log *slog.Logger) *idemFilter {
	return &idemFilter{log: log, maxSlots: max(maxBytes/idemSlotBytes, idemMinSlots)}
}

// idemFingerprint is never 0, which marks an empty slot.
func idemFingerprint(key []byte) uint32 {
	fp := uint32(xxhash.Sum64(key) >> 32)
	if fp == 0 {
		fp = 1
	}
	return fp
}

// home maps fp onto [0, n) by its high bits (Lemire's multiply-shift).
func home(fp uint32, n int) int { return int(uint64(fp) * uint64(n) >> 32) }

// fits reports whether n fingerprints fit in slots slots under the load cap.
func fits(n, slots int) bool { return n*idemMaxLoadDen <= slots*idemMaxLoadNum }

// mayContain is false only if no live key has fingerprint fp.
func (f *idemFilter) mayContain(fp uint32) bool {
	if f.slots != nil && !f.contains(fp) {
		f.stats.skipped++
		return false
	}
	f.stats.asked++
	return true
}

// contains reports whether the table holds fp; the table must be on.
func (f *idemFilter) contains(fp uint32) bool {
	n := len(f.slots)
	for i := home(fp, n); ; {
		switch f.slots[i] {
		case 0:
			return false
		case fp:
			return true
		}
		if i++; i == n {
			i = 0
		}
	}
}

// add counts a key that did not exist and is now set.
func (f *idemFilter) add(fp uint32) {
	f.live++
	f.added = append(f.added, fp)
	if f.slots == nil {
		return
	}
	if !fits(f.used+1, len(f.slots)) {
		if !f.resize(f.used + 1) {
			return
		}
	}
	f.insert(fp)
}

// removeAtCommit counts a key that existed and is deleted by the open batch.
func (f *idemFilter) removeAtCommit(fp uint32) { f.removed = append(f.removed, fp) }

// begin starts an apply batch. A previous batch that never committed
// reached Pebble with none of its sets or deletes: its adds are taken back
// and its removes dropped.
func (f *idemFilter) begin() {
	for _, fp := range f.added {
		f.drop(fp)
	}
	f.added, f.removed = f.added[:0], f.removed[:0]
}

// committed applies the batch's removes once they are in db, and resizes
// or rebuilds the table. A failed rebuild leaves the filter off, which is
// only slower; the next commit tries again.
func (f *idemFilter) committed(db storage.Reader) {
	for _, fp := range f.removed {
		f.drop(fp)
	}
	f.added, f.removed = f.added[:0], f.removed[:0]
	if len(f.slots) > idemMinSlots && f.used*idemShrinkDen < len(f.slots) {
		f.resize(f.used)
	}
	// Back on once the keys fit in half the largest table, so that a
	// count hovering at the limit does not rescan Pebble at every commit.
	if f.rebuild && fits(2*f.live, f.maxSlots) {
		if err := f.build(db); err != nil {
			f.log.Error("idempotency filter stays off", "err", err)
		}
	}
}

// drop uncounts a key that is gone from Pebble.
func (f *idemFilter) drop(fp uint32) {
	f.live--
	if f.slots != nil && !f.delete(fp) {
		// Some set was not counted, so "absent" can no longer be trusted.
		// Switch off and recount from Pebble.
		f.stats.anomalies++
		f.log.Error("idempotency filter lost track of a key; rebuilding it", "fingerprint", fp)
		f.slots, f.used, f.rebuild = nil, 0, true
	}
}

// build replaces the table with one counting every i/ key of r. With more
// keys than the largest table holds it only counts them, and stays off.
func (f *idemFilter) build(r storage.Reader) error {
	return f.built(storage.ScanEach(r, f.keyScan()))
}

// keyScan starts a build: the scan of the i/ keys that collects their
// fingerprints, for built to finish. Open runs it beside the ready
// order's scan (storage.ScanEach).
func (f *idemFilter) keyScan() storage.RangeScan {
	f.stats.rebuilds++
	f.slots, f.used, f.live = nil, 0, 0
	f.added, f.removed = f.added[:0], f.removed[:0]
	f.fps = nil
	prefix := storage.IdemPrefix()
	return storage.RangeScan{What: "idempotency filter: scan i/", Lower: prefix, Upper: storage.PrefixEnd(prefix), Fn: func(k, _ []byte) error {
		f.live++
		if fits(f.live, f.maxSlots) {
			f.fps = append(f.fps, idemFingerprint(k))
		} else {
			f.fps = nil
		}
		return nil
	}}
}

// built finishes a build from keyScan's fingerprints, or fails it with
// the scan's error, which the scan's What already names.
func (f *idemFilter) built(scanErr error) error {
	fps := f.fps
	f.fps = nil
	if scanErr != nil {
		f.rebuild = true
		return scanErr
	}
	if f.rebuild = !fits(f.live, f.maxSlots); f.rebuild {
		f.log.Warn("idempotency filter off: too many live keys for its memory bound",
			"live_keys", f.live, "max_bytes", f.maxSlots*idemSlotBytes)
		return nil
	}
	f.slots = make([]uint32, f.sizeFor(len(fps)))
	for _, fp := range fps {
		f.insert(fp)
	}
	return nil
}

// sizeFor is the table size that holds n fingerprints half full.
func (f *idemFilter) sizeFor(n int) int {
	return min(max(2*n, idemMinSlots), f.maxSlots)
}

// resize rehashes the table to hold n fingerprints half full. When n does
// not fit in the largest table it switches the filter off instead and
// returns false.
func (f *idemFilter) resize(n int) bool {
	size := f.sizeFor(n)
	if !fits(n, size) {
		f.log.Warn("idempotency filter off: too many live keys for its memory bound",
			"live_keys", f.live, "max_bytes", f.maxSlots*idemSlotBytes)
		f.slots, f.used, f.rebuild = nil, 0, true
		return false
	}
	old := f.slots
	f.slots, f.used = make([]uint32, size), 0
	for _, fp := range old {
		if fp != 0 {
			f.insert(fp)
		}
	}
	return true
}

// insert puts fp in the first free slot from its home. The caller made
// room, so there is one.
func (f *idemFilter) insert(fp uint32) {
	n := len(f.slots)
	i := home(fp, n)
	for f.slots[i] != 0 {
		if i++; i == n {
			i = 0
		}
	}
	f.slots[i] = fp
	f.used++
}

// delete removes one copy of fp, shifting later entries of its probe run
// back so that no lookup stops early at the hole (Knuth's Algorithm R).
func (f *idemFilter) delete(fp uint32) bool {
	n := len(f.slots)
	i := home(fp, n)
	for f.slots[i] != fp {
		if f.slots[i] == 0 {
			return false
		}
		if i++; i == n {
			i = 0
		}
	}
	for j := i; ; {
		if j++; j == n {
			j = 0
		}
		if f.slots[j] == 0 {
			break
		}
		// The entry at j may stay unless its home is cyclically outside
		// (i, j]: then a lookup from its home would meet the hole first.
		h := home(f.slots[j], n)
		if i <= j && i < h && h <= j || i > j && (i < h || h <= j) {
			continue
		}
		f.slots[i] = f.slots[j]
		i = j
	}
	f.slots[i] = 0
	f.used--
	return true
}

// bytes is the table's size.
func (f *idemFilter) bytes() int { return len(f.slots) * idemSlotBytes }

// getIdem reads the id of the task that idempotency key ik points at, or
// storage.ErrNotFound.
func (tx *txn) getIdem(ik []byte) (string, error) {
	if f := tx.idem; f != nil && !f.mayContain(idemFingerprint(ik)) {
		return "", storage.ErrNotFound
	}
	return storage.GetString(tx.r, ik)
}

// setIdem points ik at id. replaced says ik already existed (its task is
// gone), so the filter counts it already.
func (tx *txn) setIdem(ik []byte, id string, replaced bool) error {
	if err := tx.b.Set(ik, []byte(id), nil); err != nil {
		return fmt.Errorf("idempotency key: %w", err)
	}
	if f := tx.idem; f != nil && !replaced {
		f.add(idemFingerprint(ik))
	}
	return nil
}

// deleteIdem deletes ik, which must exist.
func (tx *txn) deleteIdem(ik []byte) error {
	if err := tx.b.Delete(ik, nil); err != nil {
		return fmt.Errorf("idempotency key: %w", err)
	}
	if f := tx.idem; f != nil {
		f.removeAtCommit(idemFingerprint(ik))
	}
	return nil
}

// openIdem is the filter of a freshly opened keyspace, empty until Open
// builds it (keyScan, built) beside the ready order; nil when Options
// turned it off.
func (f *FSM) openIdem() *idemFilter {
	if f.opts.IdemFilterBytes < 0 {
		return nil
	}
	limit := f.opts.IdemFilterBytes
	if limit == 0 {
		limit = DefaultIdemFilterBytes
	}
	return newIdemFilter(limit, f.log)
}
