package fsm

import (
	"fmt"
	"math"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// setQueuePaused pauses or resumes a queue. Pausing writes the queue's
// catalog record too (empty when the queue never held a task), so that
// Stats lists a paused queue. Resuming announces the queue's pending
// tasks, as an enqueue would: long polls that waited on the paused queue
// wake and claim.
func (tx *txn) setQueuePaused(c *pb.SetQueuePausedCmd, res *pb.CommandResult) error {
	q, tn := c.GetQueue(), c.GetTenant()
	cfg, err := storage.GetQueueConfig(tx.r, q, tn)
	if err != nil {
		return err
	}
	if cfg.GetPaused() == c.GetPaused() {
		res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_ALREADY_DONE})
		return nil
	}
	cfg.Paused = c.GetPaused()
	if err := tx.putConfig(q, tn, cfg); err != nil {
		return err
	}
	m, err := tx.meta(q, tn, c.GetPaused())
	if err != nil {
		return err
	}
	// A resume may leave the queue empty and without configuration: let
	// empty-queue removal (LevelRetries) see it, or the record a pause
	// wrote would stay for good.
	tx.metas[QueueRef{Queue: q, Tenant: tn}].touched = true
	if !c.GetPaused() && m.Pending > 0 {
		tx.announcePending(q, tn)
	}
	res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_OK})
	return nil
}

// purgeQueue deletes up to limit waiting tasks of a queue (pending and
// delayed, in index order) or its dead letters. Running tasks belong to
// their workers and finished ones to retention; neither is touched.
// WaitResult calls on a deleted task wake (and find it gone).
func (tx *txn) purgeQueue(c *pb.PurgeQueueCmd, res *pb.CommandResult) error {
	q, tn, limit := c.GetQueue(), c.GetTenant(), int(c.GetLimit())
	var ids []string
	if c.GetDead() {
		// Dead letters by their keys, .../x/<id>.
		prefix := storage.DeadPrefix(q, tn)
		err := storage.Scan(tx.r, prefix, storage.PrefixEnd(prefix), limit, func(k, _ []byte) error {
			if len(k) <= len(prefix) {
				return fmt.Errorf("malformed index key %q", k)
			}
			ids = append(ids, string(k[len(prefix):]))
			return nil
		})
		if err != nil {
			return fmt.Errorf("purge queue %s/%s: %w", q, tn, err)
		}
	} else {
		// Pending tasks in claim order, then delayed ones by time: the
		// ready order holds both, in the order of their index keys.
		ref := QueueRef{q, tn}
		for p := int(MaxPriority); p >= 0 && len(ids) < limit; p-- {
			for _, h := range tx.ready.heads(ref, uint32(p), 0, limit-len(ids)) {
				ids = append(ids, h.id)
			}
		}
		if len(ids) < limit {
			for _, e := range tx.ready.due(ref, math.MaxInt64, limit-len(ids)) {
				ids = append(ids, e.ID)
			}
		}
	}
	for _, id := range ids {
		t, ok, err := tx.getTask(id)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("queue index points at missing task %s", id)
		}
		if err := tx.remove(t); err != nil {
			return err
		}
		tx.ev.Finished = append(tx.ev.Finished, id)
		res.Items = append(res.Items, &pb.ItemResult{TaskId: id})
	}
	return nil
}
