package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/google/btree"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// readyOrder is, per queue, the two orders a claim reads, in memory: its
// pending tasks per priority by (seq, id), and its delayed tasks by
// (visible_at, id), the order of its q/…/d/ keys. A claim takes its heads,
// and the delayed tasks that are due, from here, never from Pebble.
//
// From LevelDelayedInMemory on the delayed orders live here alone too
// (delayed.go), as the running tasks' do from LevelRunningInMemory on
// (running.go).
//
// From LevelPendingInMemory on, the pending order lives here alone: apply
// writes no pending index key, and this order is the only index of the
// pending tasks (ListTasks, Stats' oldest pending, PurgeQueue and the
// keyed queues read it too). Below that level apply still writes the
// q/…/p/ keys an older build reads, and this order holds the same tasks
// in the same order. Either way it is a function of the task records:
//   - Open and Restore build it from the records (t/) when the catalog
//     counts a pending or delayed task anywhere;
//   - txn.write adds a task that becomes pending or delayed, txn.move and
//     txn.remove take out one that leaves either state, written through as
//     the batch goes, so a later command of the same batch sees earlier
//     ones;
//   - a batch that never commits marks it stale, as it does the claim
//     view, and whoever takes it next rebuilds it from the committed
//     records: it cannot tell which of its writes Pebble took.
//
// mu is held by apply for a whole segment, up to its commit, and by the
// readers outside apply while they clone a queue's trees and take their
// Pebble snapshot; so a reader's ids and records are of one state.
//
// Items are two integers, a position and the task id packed as
// TaskID's (index, position), so the trees hold no pointer for the
// collector to trace and 1M tasks cost about 20 MB. Every id TaskID makes
// below index 2^48 packs; a record whose id does not is an error of the
// keyspace (no build ever wrote one).
//
// checkReadyOrder (tests) compares it with the records.
type readyOrder struct {
	mu     sync.Mutex
	queues map[QueueRef]*readyQueue
	// wakes is every queue's delayed tasks by (visible_at, id), the order
	// of the w/ keys: what PromoteDelayed takes (delayed.go).
	wakes *btree.BTreeG[orderItem]
	// running is the running tasks' orders (running.go), kept with the
	// ready order's lock, staleness and rebuild.
	running runningOrder
	// idem is the idempotency index (idem.go), rebuilt from the same scan
	// of the records.
	idem *idemIndex
	// expiry is the finished tasks and the expiring dead letters by
	// (expire_at, id), the order of the e/ keys (expiry.go).
	expiry *btree.BTreeG[orderItem]
	stale  bool
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
func packID[ID string | []byte](id ID) (uint64, bool) {
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
func (it orderItem) taskID() string { return unpackID(it.id) }

// unpackID is the task id packID packed.
func unpackID(id uint64) string { return TaskID(id>>16, int(id&0xffff)) }

func orderLess(a, b orderItem) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.id < b.id
}

// orderDegree keeps nodes of 63 items of 16 bytes, about 1 KiB a node,
// with no pointer among the items for the collector to trace.
const orderDegree = 32

func newReadyOrder() *readyOrder {
	return &readyOrder{
		queues:  map[QueueRef]*readyQueue{},
		wakes:   btree.NewG(orderDegree, orderLess),
		running: newRunningOrder(),
		idem:    newIdemIndex(),
		expiry:  btree.NewG(orderDegree, orderLess),
	}
}

// markStale makes the next batch rebuild the order before it applies.
func (o *readyOrder) markStale() {
	if o != nil {
		o.stale = true
	}
}

// tree is the order t sits in while it is pending or delayed, created if
// create is set; nil for any other state.
func (o *readyOrder) tree(t *pb.Task, create bool) **btree.BTreeG[orderItem] {
	return o.treeAt(QueueRef{t.GetQueue(), t.GetTenant()}, t.GetState(), t.GetPriority(), create)
}

// treeAt is tree for a task's fields read apart (Open's header scan).
func (o *readyOrder) treeAt(ref QueueRef, st pb.TaskState, prio uint32, create bool) **btree.BTreeG[orderItem] {
	if st != pb.TaskState_TASK_STATE_PENDING && st != pb.TaskState_TASK_STATE_DELAYED {
		return nil
	}
	q := o.queues[ref]
	if q == nil {
		if !create {
			return nil
		}
		q = &readyQueue{}
		o.queues[ref] = q
	}
	if st == pb.TaskState_TASK_STATE_DELAYED {
		return &q.delayed
	}
	return &q.pending[prio]
}

// itemOf is t's item in its order; ok is false when its id does not pack.
func itemOf(t *pb.Task) (orderItem, bool) {
	return itemAt(t.GetId(), t.GetState(), t.GetVisibleAt(), t.GetSeq())
}

func itemAt[ID string | []byte](id ID, st pb.TaskState, visibleAt int64, seq uint64) (orderItem, bool) {
	packed, ok := packID(id)
	if st == pb.TaskState_TASK_STATE_DELAYED {
		return orderItem{uint64(visibleAt), packed}, ok
	}
	return orderItem{seq, packed}, ok
}

// insert puts it into *tr, making the tree on first use.
func insert(tr **btree.BTreeG[orderItem], it orderItem) {
	if *tr == nil {
		*tr = btree.NewG(orderDegree, orderLess)
	}
	(*tr).ReplaceOrInsert(it)
}

// add notes a task that became pending, delayed, running, finished or
// dead.
func (o *readyOrder) add(t *pb.Task) error {
	if o == nil {
		return nil
	}
	if at, ok := expiresAt(t); ok {
		id, ok := packID(t.GetId())
		if !ok {
			return fmt.Errorf("expiry order: task id %q does not pack", t.GetId())
		}
		o.expiry.ReplaceOrInsert(orderItem{timeAt(at), id})
		return nil
	}
	if t.GetState() == pb.TaskState_TASK_STATE_RUNNING {
		a, ok := runningOf(t)
		if !ok {
			return fmt.Errorf("running order: task id %q does not pack", t.GetId())
		}
		o.running.add(a)
		return nil
	}
	if tr := o.tree(t, true); tr != nil {
		it, ok := itemOf(t)
		if !ok {
			return fmt.Errorf("ready order: task id %q does not pack", t.GetId())
		}
		insert(tr, it)
		if t.GetState() == pb.TaskState_TASK_STATE_DELAYED {
			o.wakes.ReplaceOrInsert(wakeAt(t.GetVisibleAt(), it.id))
		}
	}
	return nil
}

// remove notes a task that leaves its state (claimed, promoted,
// cancelled, purged, updated, requeued), before its fields change. A
// queue left with no task in either order is dropped, so the order holds
// only queues with a backlog.
func (o *readyOrder) remove(t *pb.Task) {
	if o == nil {
		return
	}
	if at, ok := expiresAt(t); ok {
		if id, ok := packID(t.GetId()); ok { // else never added: add refuses such an id
			o.expiry.Delete(orderItem{timeAt(at), id})
		}
		return
	}
	if t.GetState() == pb.TaskState_TASK_STATE_RUNNING {
		if a, ok := runningOf(t); ok { // else never added: add refuses such an id
			o.running.remove(a)
		}
		return
	}
	tr := o.tree(t, false)
	if tr == nil || *tr == nil {
		return
	}
	it, ok := itemOf(t)
	if !ok {
		return // never added: add refuses such an id
	}
	(*tr).Delete(it)
	if t.GetState() == pb.TaskState_TASK_STATE_DELAYED {
		o.wakes.Delete(wakeAt(t.GetVisibleAt(), it.id))
	}
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

// rebuild reads the order and the idempotency index from the task
// records. At a 1M backlog it reads 1M headers (BenchmarkOpen_Backlog), as
// it does for 1M finished tasks kept for their retention. The scans in
// beside run alongside the records' scan (storage.ScanEach).
func (o *readyOrder) rebuild(r storage.Reader, beside ...storage.RangeScan) error {
	// Every record is read, whatever its state: any of them may hold an
	// idempotency key.
	fresh := newReadyOrder()
	beside = append(beside, fresh.recordScan(r))
	if err := storage.ScanEach(r, beside...); err != nil {
		return err // each scan's error names its scan
	}
	o.queues, o.wakes, o.running, o.idem, o.expiry = fresh.queues, fresh.wakes, fresh.running, fresh.idem, fresh.expiry
	o.stale = false
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
	if q == nil || q.delayed == nil {
		return nil
	}
	return upTo(q.delayed, now, limit)
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
// queue from seq from on, in claim order.
func (tx *txn) pendingHeads(q, tn string, prio uint32, from uint64, want int) []pendingHead {
	return tx.ready.heads(QueueRef{q, tn}, prio, from, want)
}

// dueDelayed returns up to limit delayed tasks of a queue due by the
// batch's time.
func (tx *txn) dueDelayed(q, tn string, limit int) []storage.TimeEntry {
	return tx.ready.due(QueueRef{q, tn}, tx.now, limit)
}

// clonePending is a copy of ref's pending orders that a reader outside
// apply may walk while apply goes on: btree's clones share nodes and copy
// them on the next write of either side. nil when the queue has no
// backlog. Under mu.
func (o *readyOrder) clonePending(ref QueueRef) *readyQueue {
	q := o.queues[ref]
	if q == nil {
		return nil
	}
	c := &readyQueue{}
	for p, t := range q.pending {
		if t != nil {
			c.pending[p] = t.Clone()
		}
	}
	return c
}

// headIDs is the first pending task of each priority of every queue with
// one that matches queue and tenant ("" matches all), for Stats' oldest
// pending. Under mu, which apply waits on: it visits no other queue.
func (o *readyOrder) headIDs(queue, tenant string) map[QueueRef][]string {
	out := map[QueueRef][]string{}
	for ref, q := range o.queues {
		if (queue != "" && ref.Queue != queue) || (tenant != "" && ref.Tenant != tenant) {
			continue
		}
		for _, t := range q.pending {
			if t == nil {
				continue
			}
			if it, ok := t.Min(); ok {
				out[ref] = append(out[ref], it.taskID())
			}
		}
	}
	return out
}

// walkPending walks q, a clone of ref's pending orders (nil: no backlog), as the
// pending index's keys, q/<queue>/<tenant>/p/<255-prio>/<seq>/<id>, would
// be scanned: the keys it gives are those bytes, so a listing's cursor is
// the same whether the index is stored or not.
func walkPending(q *readyQueue, ref QueueRef) storage.IndexWalk {
	prefix := storage.PendingPrefix(ref.Queue, ref.Tenant)
	return func(lower []byte, fn func(key []byte) error) error {
		if q == nil {
			return nil
		}
		// Where lower falls: the range's start, or just past a key of it
		// (a cursor's key and a zero byte). A priority above MaxPriority
		// sorts before every key.
		top, from := int(MaxPriority), uint64(0)
		if len(lower) > len(prefix) {
			if p := 255 - int(lower[len(prefix)]); p <= int(MaxPriority) {
				top = p
				if len(lower) >= len(prefix)+2+8 {
					from = binary.BigEndian.Uint64(lower[len(prefix)+2:])
				}
			}
		}
		v := keyVisitor{lower: lower, fn: fn}
		for p := top; p >= 0 && !v.stopped; p-- {
			tree := q.pending[p]
			if tree == nil {
				continue
			}
			start := orderItem{}
			if p == top {
				start.at = from
			}
			tree.AscendGreaterOrEqual(start, func(it orderItem) bool {
				return v.visit(storage.PendingKey(ref.Queue, ref.Tenant, uint32(p), it.at, it.taskID()))
			})
		}
		return v.err
	}
}

// keyVisitor hands an index walk's fn the keys an order synthesises, from
// lower on (a cursor's key and a zero byte, or the range's start): visit
// is a btree ascent's callback. It stops at fn's first error, which err
// keeps unless it is storage.ErrStop, the end a listing asks for.
type keyVisitor struct {
	lower   []byte
	fn      func(key []byte) error
	err     error
	stopped bool
}

func (v *keyVisitor) visit(k []byte) bool {
	if bytes.Compare(k, v.lower) < 0 {
		return true
	}
	if e := v.fn(k); e != nil {
		v.stopped = true
		if !errors.Is(e, storage.ErrStop) {
			v.err = e
		}
		return false
	}
	return true
}
