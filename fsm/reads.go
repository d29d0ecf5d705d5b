package fsm

// The FSM's read API: what the layers above read of the keyspace outside
// apply. Every read holds FSM.mu's read lock (reader, view), so a Restore
// cannot swap or close the keyspace under it; none reads apply's record
// cache.

import (
	"errors"
	"fmt"

	"github.com/google/btree"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// reader returns a Reader over the current DB and a release func.
func (f *FSM) reader() (storage.Reader, func(), error) {
	f.reads.Add(1)
	f.mu.RLock()
	if f.db == nil {
		f.mu.RUnlock()
		return nil, nil, errors.New("fsm closed")
	}
	if f.windowed() {
		return windowReader{f: f}, f.mu.RUnlock, nil
	}
	return storage.Wrap(f.db), f.mu.RUnlock, nil
}

// view is a reader for reads of more than one step (scan an index, then read
// the records it names): a Pebble snapshot, so that all steps see one
// state. Straight from the DB, an apply between the steps could purge a
// task the scan had found, and the read failed with "not found" (found by
// Test_ReadsDuringApply).
func (f *FSM) view() (storage.Reader, func(), error) {
	f.reads.Add(1)
	f.mu.RLock()
	if f.db == nil {
		f.mu.RUnlock()
		return nil, nil, errors.New("fsm closed")
	}
	f.checkpoint()
	snap := f.db.NewSnapshot()
	return storage.Wrap(snap), func() {
		_ = snap.Close() // fails only on a double close
		f.mu.RUnlock()
	}, nil
}

// orderView is view() with the ready order of the same state: fn reads
// the order (clonePending, headIDs) under its lock, which apply holds for a
// whole segment, and the Pebble snapshot is taken before the lock goes.
// A stale order (a batch that never committed) is rebuilt first from the
// committed records. fn reports whether the caller reads Pebble after it;
// when it does not (a reaper's tick with no lease expired), no snapshot is
// taken, nor a checkpoint (checkpoint.go), and the reader is nil.
func (f *FSM) orderView(fn func(o *readyOrder) bool) (storage.Reader, func(), error) {
	f.reads.Add(1)
	f.mu.RLock()
	if f.db == nil {
		f.mu.RUnlock()
		return nil, nil, errors.New("fsm closed")
	}
	o := f.ready
	o.mu.Lock()
	if o.stale {
		if err := o.rebuild(storage.Wrap(f.db)); err != nil {
			o.mu.Unlock()
			f.mu.RUnlock()
			return nil, nil, err
		}
	}
	if !fn(o) {
		o.mu.Unlock()
		return nil, f.mu.RUnlock, nil
	}
	f.checkpointLocked()
	snap := f.db.NewSnapshot()
	o.mu.Unlock()
	return storage.Wrap(snap), func() {
		_ = snap.Close() // fails only on a double close
		f.mu.RUnlock()
	}, nil
}

// Reads counts the read API's calls (GetTask, Counts, Stats, ListTasks…)
// since Open: each opened the keyspace outside apply. Apply's own reads are
// not counted.
func (f *FSM) Reads() uint64 { return f.reads.Load() }

// GetTask reads a task from the local replica. ErrNotFound when absent.
func (f *FSM) GetTask(id string) (*pb.Task, error) {
	r, release, err := f.reader()
	if err != nil {
		return nil, err
	}
	defer release()
	t, err := storage.GetTask(r, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("get %s: %w", id, pb.ErrNotFound)
	}
	return t, err
}

// GetTaskAt is GetTask together with the applied index the answer reflects,
// both read from one Pebble snapshot, so that answers of different replicas
// at the same index can be compared (the harness's read checker does).
// ErrNotFound, with the index, when absent.
func (f *FSM) GetTaskAt(id string) (*pb.Task, uint64, error) {
	r, release, err := f.view()
	if err != nil {
		return nil, 0, err
	}
	defer release()
	applied, err := storage.GetUint64(r, storage.KeyApplied)
	if err != nil {
		return nil, 0, fmt.Errorf("get %s: applied index: %w", id, err)
	}
	t, err := storage.GetTask(r, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, applied, fmt.Errorf("get %s: %w", id, pb.ErrNotFound)
	}
	return t, applied, err
}

// Stats reports per-queue counters from the local replica.
func (f *FSM) Stats(queue, tenant string) ([]*pb.QueueStats, error) {
	out, _, err := f.statsPage(queue, tenant, "", 0)
	return out, err
}

// statsPage reads the counters from a snapshot and each queue's pending
// heads from the ready order of the same state.
func (f *FSM) statsPage(queue, tenant, cursor string, maxBytes int) ([]*pb.QueueStats, string, error) {
	var heads map[QueueRef][]string
	r, release, err := f.orderView(func(o *readyOrder) bool { heads = o.headIDs(queue, tenant); return true })
	if err != nil {
		return nil, "", err
	}
	defer release()
	out, next, err := storage.StatsPageHeads(r, queue, tenant, cursor, maxBytes, func(q, tn string) ([]string, error) {
		return heads[QueueRef{q, tn}], nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, fillLimits(r, out, f.now.Load())
}

// StatsPage is Stats from after cursor, within AnswerBudget bytes (at
// least one queue), with the cursor of the next page ("" at the end).
func (f *FSM) StatsPage(queue, tenant, cursor string) ([]*pb.QueueStats, string, error) {
	return pageErr(f.statsPage(queue, tenant, cursor, AnswerBudget))
}

// ListTasks lists a queue's tasks in one state (pending, delayed, running or
// dead) from the local replica: up to limit tasks within AnswerBudget
// bytes (at least one), and the cursor of the next page.
func (f *FSM) ListTasks(queue, tenant string, state pb.TaskState, cursor string, limit int) ([]*pb.Task, string, error) {
	ref := QueueRef{queue, tenant}
	switch state {
	case pb.TaskState_TASK_STATE_PENDING:
		// The pending index is the ready order (stored below
		// LevelPendingInMemory too, with the same keys).
		var q *readyQueue
		r, release, err := f.orderView(func(o *readyOrder) bool { q = o.clonePending(ref); return true })
		if err != nil {
			return nil, "", err
		}
		defer release()
		return pageErr(storage.ListTasksWalk(r, queue, tenant, state, cursor, limit, AnswerBudget, walkPending(q, ref)))
	case pb.TaskState_TASK_STATE_RUNNING:
		// The running index is the running order (stored below
		// LevelRunningInMemory too, with the same keys).
		var ids *btree.BTreeG[uint64]
		r, release, err := f.orderView(func(o *readyOrder) bool { ids = o.cloneRunning(ref); return true })
		if err != nil {
			return nil, "", err
		}
		defer release()
		return pageErr(storage.ListTasksWalk(r, queue, tenant, state, cursor, limit, AnswerBudget, walkRunning(ids, ref)))
	case pb.TaskState_TASK_STATE_DELAYED:
		// The delayed index is the queue's delayed order (stored below
		// LevelDelayedInMemory too, with the same keys).
		var tr *btree.BTreeG[orderItem]
		r, release, err := f.orderView(func(o *readyOrder) bool { tr = o.cloneDelayed(ref); return true })
		if err != nil {
			return nil, "", err
		}
		defer release()
		return pageErr(storage.ListTasksWalk(r, queue, tenant, state, cursor, limit, AnswerBudget, walkDelayed(tr, ref)))
	}
	r, release, err := f.view()
	if err != nil {
		return nil, "", err
	}
	defer release()
	return pageErr(storage.ListTasks(r, queue, tenant, state, cursor, limit, AnswerBudget))
}

// ExpiredLeases lists (task, fence) pairs whose lease ended at or before
// now, for the leader's reaper to propose as a Reap command.
func (f *FSM) ExpiredLeases(now int64, limit int) ([]*pb.ReapItem, error) {
	var entries []storage.TimeEntry
	r, release, err := f.orderView(func(o *readyOrder) bool { entries = o.expiredLeases(now, limit); return len(entries) > 0 })
	if err != nil {
		return nil, err
	}
	defer release()
	items := make([]*pb.ReapItem, 0, len(entries))
	for _, e := range entries {
		t, _, err := storage.GetTaskHeader(r, e.ID)
		if err != nil {
			return nil, fmt.Errorf("expired lease %s: %w", e.ID, err)
		}
		items = append(items, &pb.ReapItem{TaskId: e.ID, Fence: t.GetFence()})
	}
	return items, nil
}

// HasDue reports whether delayed tasks are due or finished tasks have
// expired at now, so the leader proposes PromoteDelayed or Purge only when
// they would do something.
func (f *FSM) HasDue(now int64) (delayed, expired bool, err error) {
	var d, e []storage.TimeEntry
	_, release, err := f.orderView(func(o *readyOrder) bool { d, e = o.dueAcross(now, 1), o.expired(now, 1); return false })
	if err != nil {
		return false, false, err
	}
	release()
	if len(e) == 0 { // tombstones of purged tasks expire through Purge too
		r, release, err := f.reader()
		if err != nil {
			return false, false, err
		}
		defer release()
		if e, err = storage.ExpiredTombs(r, now, 1); err != nil {
			return false, false, err
		}
	}
	return len(d) > 0, len(e) > 0, nil
}

// DiskMetrics reads the keyspace's Pebble metrics.
func (f *FSM) DiskMetrics() (storage.DiskMetrics, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return storage.DiskMetrics{}, errors.New("disk metrics: fsm closed")
	}
	return storage.Metrics(f.db), nil
}
