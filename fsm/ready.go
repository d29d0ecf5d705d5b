package fsm

import (
	"fmt"
	"math"

	"github.com/google/btree"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// readyOrder is, per queue, the two orders a claim reads, in memory: its
// pending tasks per priority by (seq, id), the order of the q/…/p/ keys
// within a priority, and its delayed tasks by (visible_at, id), the order
// of its q/…/d/ keys. A claim takes its heads, and the delayed tasks that
// are due, from here instead of opening Pebble iterators over those
// ranges at every claim.
//
// It is apply's alone, and a cache of the keyspace's indexes, which apply
// still writes (the keyspace, its hash and snapshots do not depend on it):
//   - Open and Restore build it from the pending and delayed keys of every
//     queue whose catalog record counts such tasks;
//   - txn.write adds a task that becomes pending or delayed, txn.move and
//     txn.remove take out one that leaves either state, written through as
//     the batch goes, so a later command of the same batch sees earlier
//     ones;
//   - a batch that never commits marks it stale, as it does the claim
//     view, and the next batch rebuilds it before it applies: it cannot
//     tell which of its writes Pebble took.
//
// Items are two integers, a position and the task id packed as
// TaskID's (index, position), so the trees hold no pointer for the
// collector to trace and 1M tasks cost about 20 MB. A task id that does
// not pack turns the order off (off), and claims scan Pebble, as the
// idempotency filter turns itself off past its budget: it changes speed,
// never state.
//
// checkReadyOrder (tests) compares it with Pebble.
type readyOrder struct {
	queues map[QueueRef]*readyQueue
	stale  bool
	off    bool
}

// readyQueue is one queue's orders; a tree is nil until a task is added
// to it, and a queue with every tree empty is dropped.
type readyQueue struct {
	pending [MaxPriority + 1]*btree.BTreeG[orderItem] // by (seq, id)
	delayed *btree.BTreeG[orderItem]                  // by (visible_at, id)
}

// orderItem is one task in an order: its position (a pending seq, or a
// delayed visible_at) and its id packed by packID, which breaks ties as
// the key's bytes do. Positions are never negative, so as uint64 they
// sort as the keys' big-endian encodings do.
type orderItem struct {
	at uint64
	id uint64
}

// packID is TaskID's (index, position) as one integer, index<<16 | pos,
// which sorts as the id's 20 fixed-width hex digits do; ok is false for
// an id TaskID did not make, or an index too large to pack.
func packID(id string) (uint64, bool) {
	if len(id) != 20 {
		return 0, false
	}
	var v uint64
	for i := 0; i < 20; i++ {
		c := id[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		default:
			return 0, false
		}
		if i < 4 && d != 0 { // the index's top 16 bits: past 2^48 it does not fit
			return 0, false
		}
		v = v<<4 | uint64(d)
	}
	return v, true
}

// taskID is the id packID packed.
func (it orderItem) taskID() string { return TaskID(it.id>>16, int(it.id&0xffff)) }

func orderLess(a, b orderItem) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.id < b.id
}

// orderDegree keeps nodes of 63 items of 16 bytes, about 1 KiB a node,
// with no pointer among the items for the collector to trace.
const orderDegree = 32

func newReadyOrder() *readyOrder { return &readyOrder{queues: map[QueueRef]*readyQueue{}} }

// markStale makes the next batch rebuild the order before it applies.
func (o *readyOrder) markStale() {
	if o != nil {
		o.stale = true
	}
}

// tree is the order t sits in while it is pending or delayed, created if
// create is set; nil for any other state.
func (o *readyOrder) tree(t *pb.Task, create bool) **btree.BTreeG[orderItem] {
	if st := t.GetState(); st != pb.TaskState_TASK_STATE_PENDING && st != pb.TaskState_TASK_STATE_DELAYED {
		return nil
	}
	ref := QueueRef{t.GetQueue(), t.GetTenant()}
	q := o.queues[ref]
	if q == nil {
		if !create {
			return nil
		}
		q = &readyQueue{}
		o.queues[ref] = q
	}
	if t.GetState() == pb.TaskState_TASK_STATE_DELAYED {
		return &q.delayed
	}
	return &q.pending[t.GetPriority()]
}

// itemOf is t's item in its order; ok is false when its id does not pack.
func itemOf(t *pb.Task) (orderItem, bool) {
	id, ok := packID(t.GetId())
	if t.GetState() == pb.TaskState_TASK_STATE_DELAYED {
		return orderItem{uint64(t.GetVisibleAt()), id}, ok
	}
	return orderItem{t.GetSeq(), id}, ok
}

// turnOff gives up on the order until the next rebuild: claims scan
// Pebble meanwhile.
func (o *readyOrder) turnOff() {
	o.off = true
	clear(o.queues)
}

// add notes a task that became pending or delayed.
func (o *readyOrder) add(t *pb.Task) {
	if o == nil || o.off {
		return
	}
	if tr := o.tree(t, true); tr != nil {
		it, ok := itemOf(t)
		if !ok {
			o.turnOff()
			return
		}
		if *tr == nil {
			*tr = btree.NewG(orderDegree, orderLess)
		}
		(*tr).ReplaceOrInsert(it)
	}
}

// remove notes a pending or delayed task that leaves its state (claimed,
// promoted, cancelled, purged, updated), before its fields change. A
// queue left with no task in either order is dropped, so the order holds
// only queues with a backlog.
func (o *readyOrder) remove(t *pb.Task) {
	if o == nil || o.off {
		return
	}
	tr := o.tree(t, false)
	if tr == nil || *tr == nil {
		return
	}
	it, ok := itemOf(t)
	if !ok {
		o.turnOff()
		return
	}
	(*tr).Delete(it)
	if (*tr).Len() > 0 {
		return
	}
	*tr = nil
	ref := QueueRef{t.GetQueue(), t.GetTenant()}
	q := o.queues[ref]
	if q.delayed != nil {
		return
	}
	for _, p := range q.pending {
		if p != nil {
			return
		}
	}
	delete(o.queues, ref)
}

// rebuild reads the pending and delayed keys of every queue whose
// catalog record counts such tasks.
func (o *readyOrder) rebuild(r storage.Reader) error {
	type want struct {
		ref              QueueRef
		pending, delayed bool
	}
	var refs []want
	err := scanCatalog(r, func(ref QueueRef, m *storage.QueueMeta) {
		if m.Pending > 0 || m.Delayed > 0 {
			refs = append(refs, want{ref, m.Pending > 0, m.Delayed > 0})
		}
	})
	if err != nil {
		return fmt.Errorf("ready order: catalog: %w", err)
	}
	queues := make(map[QueueRef]*readyQueue, len(refs))
	for _, w := range refs {
		q := &readyQueue{}
		insert := func(tr **btree.BTreeG[orderItem], it orderItem) {
			if *tr == nil {
				*tr = btree.NewG(orderDegree, orderLess)
			}
			(*tr).ReplaceOrInsert(it)
		}
		packed := true
		for p := 0; w.pending && p < len(q.pending); p++ {
			prefix := storage.PendingPrioPrefix(w.ref.Queue, w.ref.Tenant, uint32(p))
			err := storage.Scan(r, prefix, storage.PrefixEnd(prefix), 0, func(k, _ []byte) error {
				seq, id, err := storage.ParsePendingKey(k, len(prefix))
				if err != nil {
					return err
				}
				u, ok := packID(id)
				packed = packed && ok
				insert(&q.pending[p], orderItem{seq, u})
				return nil
			})
			if err != nil {
				return fmt.Errorf("ready order of %s/%s: %w", w.ref.Queue, w.ref.Tenant, err)
			}
		}
		if w.delayed {
			all, err := storage.DueDelayedInQueue(r, w.ref.Queue, w.ref.Tenant, math.MaxInt64, 0)
			if err != nil {
				return fmt.Errorf("delayed order of %s/%s: %w", w.ref.Queue, w.ref.Tenant, err)
			}
			for _, e := range all {
				u, ok := packID(e.ID)
				packed = packed && ok
				insert(&q.delayed, orderItem{uint64(e.At), u})
			}
		}
		if !packed {
			o.stale = false
			o.turnOff()
			return nil
		}
		queues[w.ref] = q
	}
	o.queues, o.stale, o.off = queues, false, false
	return nil
}

// heads returns up to want pending tasks of one priority of a queue, at
// or after seq from: what a scan of the pending keys from
// storage.PendingSeek(from) finds.
func (o *readyOrder) heads(ref QueueRef, prio uint32, from uint64, want int) []pendingHead {
	q := o.queues[ref]
	if q == nil || q.pending[prio] == nil {
		return nil
	}
	tree := q.pending[prio]
	out := make([]pendingHead, 0, min(want, tree.Len()))
	tree.AscendGreaterOrEqual(orderItem{at: from}, func(it orderItem) bool {
		out = append(out, pendingHead{it.at, it.taskID()})
		return len(out) < want
	})
	return out
}

// due returns up to limit delayed tasks of a queue visible at or before
// now, earliest first: what storage.DueDelayedInQueue finds.
func (o *readyOrder) due(ref QueueRef, now int64, limit int) []storage.TimeEntry {
	q := o.queues[ref]
	if q == nil || q.delayed == nil || now < 0 {
		return nil
	}
	var out []storage.TimeEntry
	q.delayed.Ascend(func(it orderItem) bool {
		if it.at > uint64(now) {
			return false
		}
		out = append(out, storage.TimeEntry{At: int64(it.at), ID: it.taskID()})
		return len(out) < limit
	})
	return out
}

// dump lists a queue's orders, for the tests' comparison with Pebble; ok
// is false when the order holds no task of it.
func (o *readyOrder) dump(ref QueueRef) (lines []string, ok bool) {
	q := o.queues[ref]
	if q == nil {
		return nil, false
	}
	for p := len(q.pending) - 1; p >= 0; p-- {
		if q.pending[p] == nil {
			continue
		}
		q.pending[p].Ascend(func(it orderItem) bool {
			lines = append(lines, fmt.Sprintf("p/%d/%d/%s", p, it.at, it.taskID()))
			return true
		})
	}
	if q.delayed != nil {
		q.delayed.Ascend(func(it orderItem) bool {
			lines = append(lines, fmt.Sprintf("d/%d/%s", it.at, it.taskID()))
			return true
		})
	}
	return lines, true
}

// loaded lists the queues the order holds, for the tests.
func (o *readyOrder) loaded() []QueueRef {
	refs := make([]QueueRef, 0, len(o.queues))
	for ref := range o.queues {
		refs = append(refs, ref)
	}
	return refs
}

// pendingHead is one pending task a claim may take.
type pendingHead struct {
	seq uint64
	id  string
}

// pendingHeads returns up to want pending tasks of one priority of a
// queue from seq from on, in claim order: from the ready order, or from
// Pebble when it is off.
func (tx *txn) pendingHeads(q, tn string, prio uint32, from uint64, want int) ([]pendingHead, error) {
	if tx.ready != nil && !tx.ready.off {
		return tx.ready.heads(QueueRef{q, tn}, prio, from, want), nil
	}
	var heads []pendingHead
	prefix := storage.PendingPrioPrefix(q, tn, prio)
	err := storage.Scan(tx.r, storage.PendingSeek(q, tn, prio, from), storage.PrefixEnd(prefix), want,
		func(k, _ []byte) error {
			seq, id, err := storage.ParsePendingKey(k, len(prefix))
			heads = append(heads, pendingHead{seq, id})
			return err
		})
	return heads, err
}

// dueDelayed returns up to limit delayed tasks of a queue due by the
// batch's time: from the ready order, or from Pebble when it is off.
func (tx *txn) dueDelayed(q, tn string, limit int) ([]storage.TimeEntry, error) {
	if tx.ready != nil && !tx.ready.off {
		return tx.ready.due(QueueRef{q, tn}, tx.now, limit), nil
	}
	return storage.DueDelayedInQueue(tx.r, q, tn, tx.now, limit)
}
