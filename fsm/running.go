package fsm

import (
	"bytes"
	"fmt"

	"github.com/google/btree"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// runningOrder holds the running tasks in the three orders their stored
// indexes had: per queue by id (q/…/r/<id>, ListTasks), and across queues
// by lease end (l/<lease_until>/<id>, the reaper) and by execution
// deadline (o/<deadline_at>/<id>, TimeOut). It lives in readyOrder, under
// its lock, and follows its rules: written through by txn.write, move and
// remove, marked stale with it when a batch does not commit, rebuilt with
// it from the records.
//
// From LevelRunningInMemory on it is the only index of the running tasks:
// a claim, each heartbeat and the submit no longer set and delete those
// keys (four to six writes of each task's life, and their tombstones
// through the compactions). Below that level apply still writes them for
// an older build, and the readers read this order either way.
//
// Items are two integers, as in the ready order; the number of running
// tasks is bounded by the leases handed out, not by the backlog.
type runningOrder struct {
	byQueue   map[QueueRef]*btree.BTreeG[uint64]
	leases    *btree.BTreeG[orderItem] // by (lease_until, id)
	deadlines *btree.BTreeG[orderItem] // by (deadline_at, id); claims with an execution timeout
}

func newRunningOrder() runningOrder {
	return runningOrder{
		byQueue:   map[QueueRef]*btree.BTreeG[uint64]{},
		leases:    btree.NewG(orderDegree, orderLess),
		deadlines: btree.NewG(orderDegree, orderLess),
	}
}

func idLess(a, b uint64) bool { return a < b }

// runningAt is one running task's place in the three orders, from its
// fields read apart (a record's header) or from a task.
type runningAt struct {
	ref        QueueRef
	id         uint64
	leaseUntil int64
	deadlineAt int64
}

func runningOf(t *pb.Task) (runningAt, bool) {
	id, ok := packID(t.GetId())
	return runningAt{QueueRef{t.GetQueue(), t.GetTenant()}, id, t.GetLeaseUntil(), t.GetDeadlineAt()}, ok
}

// timeAt is a time as the stored time indexes order it (storage.TimeKey).
func timeAt(t int64) uint64 { return storage.TimeKey(t) }

func (r *runningOrder) add(a runningAt) {
	tr := r.byQueue[a.ref]
	if tr == nil {
		tr = btree.NewG(orderDegree, idLess)
		r.byQueue[a.ref] = tr
	}
	tr.ReplaceOrInsert(a.id)
	r.leases.ReplaceOrInsert(orderItem{timeAt(a.leaseUntil), a.id})
	if a.deadlineAt > 0 {
		r.deadlines.ReplaceOrInsert(orderItem{timeAt(a.deadlineAt), a.id})
	}
}

func (r *runningOrder) remove(a runningAt) {
	if tr := r.byQueue[a.ref]; tr != nil {
		tr.Delete(a.id)
		if tr.Len() == 0 {
			delete(r.byQueue, a.ref)
		}
	}
	r.leases.Delete(orderItem{timeAt(a.leaseUntil), a.id})
	if a.deadlineAt > 0 {
		r.deadlines.Delete(orderItem{timeAt(a.deadlineAt), a.id})
	}
}

// upTo lists up to limit items of tr at or before now, earliest first
// (limit <= 0: all): what a scan of the time index up to now finds
// (storage.Scan's limit, storage.TimeKey's times).
func upTo(tr *btree.BTreeG[orderItem], now int64, limit int) []storage.TimeEntry {
	var out []storage.TimeEntry
	end := timeAt(now)
	tr.Ascend(func(it orderItem) bool {
		if it.at > end {
			return false
		}
		out = append(out, storage.TimeEntry{At: int64(it.at), ID: it.taskID()})
		return limit <= 0 || len(out) < limit
	})
	return out
}

// expiredLeases is storage.ExpiredLeases over the order.
func (o *readyOrder) expiredLeases(now int64, limit int) []storage.TimeEntry {
	return upTo(o.running.leases, now, limit)
}

// pastDeadlines is storage.PastDeadline over the order.
func (o *readyOrder) pastDeadlines(now int64, limit int) []storage.TimeEntry {
	return upTo(o.running.deadlines, now, limit)
}

// runningIDs lists the running tasks of a queue in id order, for the
// keyed queues' rebuild.
func (o *readyOrder) runningIDs(ref QueueRef) []string {
	tr := o.running.byQueue[ref]
	if tr == nil {
		return nil
	}
	out := make([]string, 0, tr.Len())
	tr.Ascend(func(id uint64) bool {
		out = append(out, orderItem{id: id}.taskID())
		return true
	})
	return out
}

// cloneRunning is a copy of ref's running ids that a reader outside apply
// may walk while apply goes on (btree's lazy copy-on-write). nil when the
// queue runs nothing. Under mu.
func (o *readyOrder) cloneRunning(ref QueueRef) *btree.BTreeG[uint64] {
	if tr := o.running.byQueue[ref]; tr != nil {
		return tr.Clone()
	}
	return nil
}

// walkRunning walks tr, a clone of ref's running ids (nil: none), as the
// running index's keys, q/<queue>/<tenant>/r/<id>, would be scanned: the
// keys it gives are those bytes, so a listing's cursor pages the same
// whether the index is stored or not.
func walkRunning(tr *btree.BTreeG[uint64], ref QueueRef) storage.IndexWalk {
	return func(lower []byte, fn func(key []byte) error) error {
		if tr == nil {
			return nil
		}
		// Start at the id a cursor's key names (lower is that key and a
		// zero byte); the comparison below skips the key itself.
		var from uint64
		prefix := storage.RunningPrefix(ref.Queue, ref.Tenant)
		if rest, ok := bytes.CutPrefix(lower, prefix); ok && len(rest) >= 20 {
			from, _ = packID(rest[:20])
		}
		v := keyVisitor{lower: lower, fn: fn}
		tr.AscendGreaterOrEqual(from, func(id uint64) bool {
			return v.visit(storage.RunningKey(ref.Queue, ref.Tenant, orderItem{id: id}.taskID()))
		})
		return v.err
	}
}

// dumpRunning lists the running orders, for the tests' comparison with
// the records.
func (o *readyOrder) dumpRunning() []string {
	var lines []string
	for ref, tr := range o.running.byQueue {
		tr.Ascend(func(id uint64) bool {
			lines = append(lines, fmt.Sprintf("r/%s/%s/%s", ref.Queue, ref.Tenant, orderItem{id: id}.taskID()))
			return true
		})
	}
	o.running.leases.Ascend(func(it orderItem) bool {
		lines = append(lines, fmt.Sprintf("l/%d/%s", it.at, it.taskID()))
		return true
	})
	o.running.deadlines.Ascend(func(it orderItem) bool {
		lines = append(lines, fmt.Sprintf("o/%d/%s", it.at, it.taskID()))
		return true
	})
	return lines
}

// dropRunningIndex deletes the stored indexes of running tasks at the
// latch of LevelRunningInMemory: from then on the running order is their
// only index, on every replica from the same entry.
func (tx *txn) dropRunningIndex() error {
	refs, err := tx.queuesWhere(func(m *storage.QueueMeta) bool { return m.Running > 0 })
	if err != nil {
		return fmt.Errorf("drop the running index: %w", err)
	}
	prefixes := [][]byte{storage.LeasePrefix(), storage.DeadlinePrefix()}
	for ref := range refs {
		prefixes = append(prefixes, storage.RunningPrefix(ref.Queue, ref.Tenant))
	}
	for _, p := range prefixes {
		if err := tx.b.DeleteRange(p, storage.PrefixEnd(p), nil); err != nil {
			return fmt.Errorf("drop the running index %q: %w", p, err)
		}
	}
	return nil
}
