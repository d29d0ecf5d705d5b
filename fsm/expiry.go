package fsm

import (
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// The expiry order: every finished task, and every dead letter that
// expires (from LevelRetries), by (expire_at, id), the order of the e/
// keys. It lives in the ready order, under its lock, with its staleness
// and rebuild from the records, each of which keeps its expire_at.
//
// From LevelExpiryInMemory on it is the only index of the expiries: a
// task's end no longer sets an e/ key that its purge deletes again, and a
// retained task's key no longer rides through the compactions. Below that
// level apply still writes them for an older build, and Purge and the
// leader's HasDue read the order either way; it sorts as the keys do, so
// a mixed cluster purges the same tasks.

// expiresAt is the time t's retention ends and true, for a task the e/
// index holds (txn.indexKeys); false for any other.
func expiresAt(t *pb.Task) (int64, bool) { return expiryOf(t.GetState(), t.GetExpireAt()) }

// expiryOf is expiresAt of a task in state st with expire_at at.
func expiryOf(st pb.TaskState, at int64) (int64, bool) {
	switch st {
	case pb.TaskState_TASK_STATE_COMPLETED, pb.TaskState_TASK_STATE_FAILED, pb.TaskState_TASK_STATE_CANCELLED:
		return at, true
	case pb.TaskState_TASK_STATE_DEAD:
		return at, at > 0 // dead-lettered since LevelRetries
	}
	return 0, false
}

// expired lists up to limit tasks whose retention ended at or before now,
// earliest first (limit <= 0: all): what storage.Expired finds in the e/
// keys.
func (o *readyOrder) expired(now int64, limit int) []storage.TimeEntry {
	return upTo(o.expiry, now, limit)
}

// dumpExpiry lists the expiry order, for the tests' comparison with the
// records and the keys.
func (o *readyOrder) dumpExpiry() []string {
	var lines []string
	o.expiry.Ascend(func(it orderItem) bool {
		lines = append(lines, fmt.Sprintf("e/%d/%s", it.at, it.taskID()))
		return true
	})
	return lines
}

// dropExpiryIndex deletes the e/ range at the latch of
// LevelExpiryInMemory: from then on the expiry order is the only index of
// the expiries, on every replica from the same entry.
func (tx *txn) dropExpiryIndex() error {
	p := storage.ExpirePrefix()
	if err := tx.b.DeleteRange(p, storage.PrefixEnd(p), nil); err != nil {
		return fmt.Errorf("drop the expiry index: %w", err)
	}
	return nil
}
