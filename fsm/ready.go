package fsm

import (
	"fmt"

	"github.com/google/btree"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// readyOrder is each queue's pending tasks in claim order, in memory:
// per priority, by (seq, id), which is the order of the q/…/p/ keys
// within one priority. A claim takes its heads from here instead of
// opening a Pebble iterator over the pending range per priority per
// claim.
//
// It is apply's alone, and a cache of the keyspace's pending index, which
// apply still writes (the keyspace, its hash and snapshots do not depend
// on it):
//   - Open and Restore build it from the pending keys of every queue the
//     catalog counts pending tasks in;
//   - txn.write adds a task that becomes pending, txn.move and txn.remove
//     take out one that stops being pending, written through as the batch
//     goes, so a later command of the same batch sees earlier ones;
//   - a batch that never commits marks it stale, as it does the claim
//     view, and the next batch rebuilds it before it applies: it cannot
//     tell which of its writes Pebble took.
//
// checkReadyOrder (tests) compares it with Pebble.
type readyOrder struct {
	queues map[QueueRef]*readyQueue
	stale  bool
}

// readyQueue is one queue's pending tasks, one tree per priority; nil
// until a task of that priority is added.
type readyQueue [MaxPriority + 1]*btree.BTreeG[readyItem]

// readyItem is one pending task: its seq, and its id, which breaks ties
// as the key's bytes do.
type readyItem struct {
	seq uint64
	id  string
}

func readyLess(a, b readyItem) bool {
	if a.seq != b.seq {
		return a.seq < b.seq
	}
	return a.id < b.id
}

// readyDegree keeps nodes of 63 items of 24 bytes: few pointers for the
// collector, about 1.5 KiB a node.
const readyDegree = 32

func newReadyOrder() *readyOrder { return &readyOrder{queues: map[QueueRef]*readyQueue{}} }

// markStale makes the next batch rebuild the order before it applies.
func (o *readyOrder) markStale() {
	if o != nil {
		o.stale = true
	}
}

// add notes a task that became pending.
func (o *readyOrder) add(t *pb.Task) {
	if o == nil {
		return
	}
	ref := QueueRef{t.GetQueue(), t.GetTenant()}
	q := o.queues[ref]
	if q == nil {
		q = &readyQueue{}
		o.queues[ref] = q
	}
	q.add(t.GetPriority(), readyItem{t.GetSeq(), t.GetId()})
}

func (q *readyQueue) add(prio uint32, it readyItem) {
	if q[prio] == nil {
		q[prio] = btree.NewG(readyDegree, readyLess)
	}
	q[prio].ReplaceOrInsert(it)
}

// remove notes a pending task that left the pending state (claimed,
// cancelled, purged, updated). A queue left without pending tasks is
// dropped, so the order holds only queues with a backlog.
func (o *readyOrder) remove(t *pb.Task) {
	if o == nil {
		return
	}
	ref := QueueRef{t.GetQueue(), t.GetTenant()}
	q := o.queues[ref]
	if q == nil || q[t.GetPriority()] == nil {
		return
	}
	tree := q[t.GetPriority()]
	tree.Delete(readyItem{t.GetSeq(), t.GetId()})
	if tree.Len() > 0 {
		return
	}
	q[t.GetPriority()] = nil
	for _, tr := range q {
		if tr != nil {
			return
		}
	}
	delete(o.queues, ref)
}

// rebuild reads the pending keys of every queue whose catalog record
// counts pending tasks.
func (o *readyOrder) rebuild(r storage.Reader) error {
	var refs []QueueRef
	err := storage.Scan(r, storage.CatalogPrefix(""), storage.PrefixEnd(storage.CatalogPrefix("")), 0, func(k, val []byte) error {
		q, tn, err := storage.ParseCatalogKey(k)
		if err != nil {
			return err
		}
		m, err := storage.UnmarshalQueueMeta(val)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", q, tn, err)
		}
		if m.Pending > 0 {
			refs = append(refs, QueueRef{q, tn})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ready order: catalog: %w", err)
	}
	queues := make(map[QueueRef]*readyQueue, len(refs))
	for _, ref := range refs {
		q := &readyQueue{}
		for p := range q {
			prefix := storage.PendingPrioPrefix(ref.Queue, ref.Tenant, uint32(p))
			err := storage.Scan(r, prefix, storage.PrefixEnd(prefix), 0, func(k, _ []byte) error {
				seq, id, err := storage.ParsePendingKey(k, len(prefix))
				if err == nil {
					q.add(uint32(p), readyItem{seq, id})
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("ready order of %s/%s: %w", ref.Queue, ref.Tenant, err)
			}
		}
		queues[ref] = q
	}
	o.queues, o.stale = queues, false
	return nil
}

// heads returns up to want pending tasks of one priority of a queue, at
// or after seq from: what a scan of the pending keys from
// storage.PendingSeek(from) finds.
func (o *readyOrder) heads(ref QueueRef, prio uint32, from uint64, want int) []readyItem {
	q := o.queues[ref]
	if q == nil || q[prio] == nil {
		return nil
	}
	tree := q[prio]
	out := make([]readyItem, 0, min(want, tree.Len()))
	tree.AscendGreaterOrEqual(readyItem{seq: from}, func(it readyItem) bool {
		out = append(out, it)
		return len(out) < want
	})
	return out
}

// dump lists a queue's order, for the tests' comparison with Pebble; ok
// is false when the order holds no task of it.
func (o *readyOrder) dump(ref QueueRef) (lines []string, ok bool) {
	q := o.queues[ref]
	if q == nil {
		return nil, false
	}
	for p := len(q) - 1; p >= 0; p-- {
		if q[p] == nil {
			continue
		}
		q[p].Ascend(func(it readyItem) bool {
			lines = append(lines, fmt.Sprintf("%d/%d/%s", p, it.seq, it.id))
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

// pendingHeads returns up to want pending tasks of one priority of a
// queue from seq from on, in claim order: from the ready order, or from
// Pebble when it is off.
func (tx *txn) pendingHeads(q, tn string, prio uint32, from uint64, want int) ([]readyItem, error) {
	if tx.ready != nil {
		return tx.ready.heads(QueueRef{q, tn}, prio, from, want), nil
	}
	prefix := storage.PendingPrioPrefix(q, tn, prio)
	var heads []readyItem
	err := storage.Scan(tx.r, storage.PendingSeek(q, tn, prio, from), storage.PrefixEnd(prefix), want,
		func(k, _ []byte) error {
			seq, id, err := storage.ParsePendingKey(k, len(prefix))
			heads = append(heads, readyItem{seq, id})
			return err
		})
	return heads, err
}
