package fsm

import (
	"bytes"
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// cancel ends a task that no worker holds. A running task cannot be
// cancelled: its worker would not learn of it until its next heartbeat.
func (tx *txn) cancel(c *pb.CancelCmd, res *pb.CommandResult) error {
	t, ok, err := tx.getTaskOf(c.GetTaskId(), c.GetTenant())
	if err != nil {
		return err
	}
	switch {
	case !ok:
		res.Items = append(res.Items, item(pb.Code_CODE_NOT_FOUND, c.GetTaskId(), nil, "no such task"))
	case t.GetState() == pb.TaskState_TASK_STATE_CANCELLED:
		res.Items = append(res.Items, item(pb.Code_CODE_ALREADY_DONE, t.GetId(), t, ""))
	case t.GetState() == pb.TaskState_TASK_STATE_PENDING || t.GetState() == pb.TaskState_TASK_STATE_DELAYED ||
		t.GetState() == pb.TaskState_TASK_STATE_WAITING:
		if err := tx.finishTask(t, pb.TaskState_TASK_STATE_CANCELLED, nil); err != nil {
			return err
		}
		res.Items = append(res.Items, item(pb.Code_CODE_OK, t.GetId(), t, ""))
	case t.GetState() == pb.TaskState_TASK_STATE_RUNNING && tx.feature >= LevelCancelRunning:
		return tx.requestCancel(t, res)
	default:
		res.Items = append(res.Items, item(pb.Code_CODE_WRONG_STATE, t.GetId(), t, "only pending or delayed tasks can be cancelled"))
	}
	return nil
}

// promoteDelayed makes due delayed tasks of every queue pending.
func (tx *txn) promoteDelayed(c *pb.PromoteDelayedCmd, res *pb.CommandResult) error {
	entries := tx.ready.dueAcross(tx.now, int(c.GetLimit()))
	if err := tx.promote(entries); err != nil {
		return err
	}
	for _, e := range entries {
		res.Items = append(res.Items, &pb.ItemResult{TaskId: e.ID, State: pb.TaskState_TASK_STATE_PENDING})
	}
	return nil
}

// promote moves delayed tasks to the back of their priority.
func (tx *txn) promote(entries []storage.TimeEntry) error {
	for pos, e := range entries {
		t, ok, err := tx.getTask(e.ID)
		if err != nil {
			return err
		}
		if !ok || t.GetState() != pb.TaskState_TASK_STATE_DELAYED {
			return fmt.Errorf("delayed index points at %s in state %v", e.ID, t.GetState())
		}
		err = tx.move(t, pb.TaskState_TASK_STATE_PENDING, func(t *pb.Task) { t.Seq = tx.nextSeq(pos) })
		if err != nil {
			return err
		}
	}
	return nil
}

// purge deletes finished tasks past their retention, with their
// idempotency keys.
func (tx *txn) purge(c *pb.PurgeCmd, res *pb.CommandResult) error {
	for _, e := range tx.ready.expired(tx.now, int(c.GetLimit())) {
		t, ok, err := tx.expiredTask(e.ID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("expiry index points at missing task %s", e.ID)
		}
		if err := tx.remove(t); err != nil {
			return err
		}
		res.Items = append(res.Items, &pb.ItemResult{TaskId: t.GetId()})
	}
	return tx.purgeTombs(int(c.GetLimit()))
}

// remove deletes a stored task for good: its index keys, its record and
// its idempotency key (when it still owns it), and takes it off its
// queue's and tenant's counters.
func (tx *txn) remove(t *pb.Task) error {
	if err := tx.depsRemoved(t); err != nil {
		return err
	}
	tx.ready.remove(t)
	tx.keyedLeave(t)
	for _, k := range tx.indexKeys(t) {
		if err := tx.b.Delete(k, nil); err != nil {
			return fmt.Errorf("remove %s: %w", t.GetId(), err)
		}
	}
	if err := tx.deleteTask(t.GetId()); err != nil {
		return err
	}
	if err := tx.countTenant(t.GetTenant(), -1, -taskBytes(t)); err != nil {
		return err
	}
	if err := tx.dropIdem(t); err != nil {
		return err
	}
	m, err := tx.meta(t.GetQueue(), t.GetTenant(), true)
	if err != nil {
		return err
	}
	m.Count(t.GetState(), -1)
	return nil
}

// requeueDead replays dead letters with a fresh attempt budget, one by id or
// the oldest limit of a queue.
func (tx *txn) requeueDead(c *pb.RequeueDeadCmd, res *pb.CommandResult) error {
	ids := []string{c.GetTaskId()}
	if c.GetTaskId() == "" {
		ids = ids[:0]
		prefix := storage.DeadPrefix(c.GetQueue(), c.GetTenant())
		err := storage.Scan(tx.r, prefix, storage.PrefixEnd(prefix), int(c.GetLimit()), func(k, _ []byte) error {
			id, _ := bytes.CutPrefix(k, prefix)
			ids = append(ids, string(id))
			return nil
		})
		if err != nil {
			return fmt.Errorf("dead letters: %w", err)
		}
	}
	for pos, id := range ids {
		t, ok, err := tx.getTask(id)
		if err != nil {
			return err
		}
		if !ok {
			res.Items = append(res.Items, item(pb.Code_CODE_NOT_FOUND, id, nil, "no such task"))
			continue
		}
		if t.GetState() != pb.TaskState_TASK_STATE_DEAD {
			res.Items = append(res.Items, item(pb.Code_CODE_WRONG_STATE, id, t, "not a dead letter"))
			continue
		}
		err = tx.move(t, pb.TaskState_TASK_STATE_PENDING, func(t *pb.Task) {
			t.Attempts = 0
			t.Seq = tx.nextSeq(pos)
			t.VisibleAt = tx.now
			t.FinishedAt = 0
			t.ExpireAt = 0 // a dead letter's expiry (LevelRetries) ends with it
		})
		if err != nil {
			return err
		}
		res.Items = append(res.Items, item(pb.Code_CODE_OK, id, t, ""))
	}
	return nil
}
