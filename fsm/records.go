package fsm

import (
	"errors"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Task records as apply reads and writes them: through the header cache
// and the recent-record cache (headers.go, recent.go), in the format each
// record has (tx.formats), whole or split.

// getTask reads a task; ok is false when it does not exist.
func (tx *txn) getTask(id string) (*pb.Task, bool, error) {
	t, format, err := storage.GetTaskRecord(tx.r, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	tx.formats[id] = format
	return t, true, nil
}

// headers is the header cache (headers.go), nil when the recent-record
// cache is off.
func (tx *txn) headers() *headerCache {
	if tx.b.c == nil {
		return nil
	}
	return &tx.b.c.headers
}

// expiredTask reads a task the purge removes: from the header cache when
// it holds the whole record (a task of a short retention, which putTask
// kept there), else from Pebble.
func (tx *txn) expiredTask(id string) (*pb.Task, bool, error) {
	if h := tx.headers(); h != nil {
		if t, format, ok := h.take(id); ok && format == storage.FormatInline {
			tx.formats[id] = format
			return t, true, nil
		}
	}
	return tx.getTask(id)
}

// getHeaderOf is getTaskOf without the body of a split record (its
// Payload is then empty): for rules that change a task and answer without
// it. Its tenant rule is getTaskOf's.
func (tx *txn) getHeaderOf(id, tenant string) (*pb.Task, bool, error) {
	t, format, ok := (*pb.Task)(nil), storage.RecordFormat(0), false
	if h := tx.headers(); h != nil {
		t, format, ok = h.take(id)
	}
	if ok {
		if tx.uncachedRecords == nil {
			tx.uncachedRecords = map[string]bool{}
		}
		tx.uncachedRecords[id] = true
	} else {
		var err error
		t, format, err = storage.GetTaskHeader(tx.r, id)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
	tx.formats[id] = format
	if tenant != "" && t.GetTenant() != tenant {
		return nil, false, nil
	}
	return t, true, nil
}

// putTask writes t's record: whole before LevelSplitRecords latched, and
// from then on split, with the body written only when v/ does not hold it
// yet. A record in the old format is split at its first write after the
// latch, at the same log index on every replica. From LevelInlineBodies a
// small body is written inside the record instead (tx.inline). It returns
// taskBytes(t), counted by the encoding. fresh says t is new; uncached
// writes it around the recent-record cache (recentRecords.keepsNew).
func (tx *txn) putTask(t *pb.Task, fresh, uncached bool) (int64, error) {
	w := tx.w
	if uncached {
		w = &tx.b
	}
	if tx.feature < LevelSplitRecords {
		tx.formats[t.GetId()] = storage.FormatInline
		if h := tx.headers(); h != nil {
			h.forget(t.GetId())
		}
		n, err := storage.PutTask(w, t)
		return int64(n), err
	}
	// The recent-record cache need not hold a record the header cache
	// answers for, nor one that no reader comes back to soon (a task's
	// end): headerCache.put's rule. The header cache holds a task only
	// while the record cache holds no value of its record, so a record
	// written around it either has none there already (the header came
	// from the header cache) or has its value evicted.
	id, h := t.GetId(), tx.headers()
	whole := tx.inline(t, fresh)
	known := tx.uncachedRecords[id]
	kept := h.keeps(t, whole, tx.now)
	if known || kept {
		w = &tx.b
	}
	var format storage.RecordFormat
	var n int
	var err error
	if whole {
		format = storage.FormatInline
		n, err = storage.PutTask(w, t)
	} else {
		format, n, err = storage.PutTaskSplit(w, t, tx.formats[id] == storage.FormatSplit)
	}
	if err != nil {
		return 0, err
	}
	tx.formats[id] = format
	if h != nil {
		if kept && !known {
			var k [80]byte // a key on the stack: evict keeps only its hash
			tx.b.c.evict(storage.AppendTaskKey(k[:0], id))
		}
		h.put(t, format, tx.now)
	}
	return int64(n), nil
}

// inlineBodyMax is the largest payload written inside its task's record
// from LevelInlineBodies. Below it a second key costs Pebble more than the
// bytes it keeps out of each rewrite of the record: a 128 B task's
// batched enqueue spent a quarter less server CPU written whole, and a heartbeat
// carries at most this many bytes more (BENCHMARKS.md, "Small bodies
// inside their records").
const inlineBodyMax = 256

// inline reports whether t is written whole, its payload inside its
// record: from LevelInlineBodies, a payload of 1 to inlineBodyMax bytes,
// in a new task or one whose record is already whole. A split record
// stays split for its life, so its body, written once, is never written
// again; a whole record whose payload no longer fits is split.
func (tx *txn) inline(t *pb.Task, fresh bool) bool {
	if tx.feature < LevelInlineBodies || len(t.Payload) == 0 || len(t.Payload) > inlineBodyMax {
		return false
	}
	return fresh || tx.formats[t.GetId()] == storage.FormatInline
}

// deleteTask deletes t's record and body. A task this batch has not read
// is taken to have a body once split records may exist: deleting a key
// that is absent changes nothing, leaking a body would.
func (tx *txn) deleteTask(id string) error {
	format, ok := tx.formats[id]
	if !ok && tx.feature >= LevelSplitRecords {
		format = storage.FormatSplit
	}
	delete(tx.formats, id)
	if h := tx.headers(); h != nil {
		h.forget(id)
	}
	return storage.DeleteTask(tx.w, id, format)
}
