package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/google/btree"

	"github.com/dockethq/docket/storage"
)

// The delayed tasks' orders: per queue by (visible_at, id) in
// readyQueue.delayed, the order of the q/…/d/ keys, and across queues by
// the same in readyOrder.wakes, the order of the w/ keys. They live in the
// ready order, under its lock, with its staleness and rebuild.
//
// From LevelDelayedInMemory on they are the only index of the delayed
// tasks: a delayed enqueue, a retry's backoff and a schedule's task no
// longer set two keys that the promotion deletes again. Below that level
// apply still writes them for an older build, and every reader reads these
// orders either way: PromoteDelayed (dueAcross), the leader's HasDue, the
// claim view's delayed heads and ListTasks of delayed tasks.

// wakeAt is a delayed task's item in the wakes: its visible_at as the w/
// key encodes it.
func wakeAt(visibleAt int64, id uint64) orderItem { return orderItem{timeAt(visibleAt), id} }

// dueAcross lists up to limit delayed tasks of every queue visible at or
// before now, earliest first (limit <= 0: all): what storage.DueDelayed
// finds in the w/ keys.
func (o *readyOrder) dueAcross(now int64, limit int) []storage.TimeEntry {
	return upTo(o.wakes, now, limit)
}

// delayedHead is the earliest visible_at among ref's delayed tasks, at
// least 1; 0 when it has none.
func (o *readyOrder) delayedHead(ref QueueRef) int64 {
	q := o.queues[ref]
	if q == nil || q.delayed == nil {
		return 0
	}
	it, ok := q.delayed.Min()
	if !ok {
		return 0
	}
	return max(int64(it.at), 1) // the claim view's head: 0 means none
}

// cloneDelayed is a copy of ref's delayed order that a reader outside
// apply may walk while apply goes on; nil when the queue has no delayed
// task. Under mu.
func (o *readyOrder) cloneDelayed(ref QueueRef) *btree.BTreeG[orderItem] {
	if q := o.queues[ref]; q != nil && q.delayed != nil {
		return q.delayed.Clone()
	}
	return nil
}

// walkDelayed walks tr, a clone of ref's delayed order (nil: none), as the
// delayed index's keys, q/<queue>/<tenant>/d/<visible_at>/<id>, would be
// scanned: the keys it gives are those bytes, so a listing's cursor pages
// the same whether the index is stored or not.
func walkDelayed(tr *btree.BTreeG[orderItem], ref QueueRef) storage.IndexWalk {
	return func(lower []byte, fn func(key []byte) error) error {
		if tr == nil {
			return nil
		}
		// Start at the time and id a cursor's key names (lower is that
		// key and a zero byte); the comparison below skips the key itself.
		var from orderItem
		if rest, ok := bytes.CutPrefix(lower, storage.DelayedPrefix(ref.Queue, ref.Tenant)); ok && len(rest) >= 8 {
			from.at = binary.BigEndian.Uint64(rest)
			if len(rest) >= 9+20 {
				from.id, _ = packID(rest[9 : 9+20])
			}
		}
		v := keyVisitor{lower: lower, fn: fn}
		tr.AscendGreaterOrEqual(from, func(it orderItem) bool {
			return v.visit(storage.DelayedKey(ref.Queue, ref.Tenant, int64(it.at), it.taskID()))
		})
		return v.err
	}
}

// dumpWakes lists the wakes, for the tests' comparison with the records.
func (o *readyOrder) dumpWakes() []string {
	var lines []string
	o.wakes.Ascend(func(it orderItem) bool {
		lines = append(lines, fmt.Sprintf("w/%d/%s", it.at, it.taskID()))
		return true
	})
	return lines
}

// dropDelayedIndex deletes the stored indexes of delayed tasks at the
// latch of LevelDelayedInMemory: from then on the delayed orders are their
// only index, on every replica from the same entry.
func (tx *txn) dropDelayedIndex() error {
	refs, err := tx.queuesWhere(func(m *storage.QueueMeta) bool { return m.Delayed > 0 })
	if err != nil {
		return fmt.Errorf("drop the delayed index: %w", err)
	}
	prefixes := [][]byte{storage.WakePrefix()}
	for ref := range refs {
		prefixes = append(prefixes, storage.DelayedPrefix(ref.Queue, ref.Tenant))
	}
	for _, p := range prefixes {
		if err := tx.b.DeleteRange(p, storage.PrefixEnd(p), nil); err != nil {
			return fmt.Errorf("drop the delayed index %q: %w", p, err)
		}
	}
	return nil
}
