package fsm

import (
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// setFeatureLevel raises the latch. It never lowers it: a feature, once
// enabled, stays enabled, since entries that use it may already be in the
// log. ApplyBatch has stopped the node already if its build cannot apply
// the level.
func (tx *txn) setFeatureLevel(c *pb.SetFeatureLevelCmd) error {
	if c.GetLevel() <= tx.feature {
		return nil
	}
	if tx.feature < LevelLimits && c.GetLevel() >= LevelLimits {
		if err := tx.countTenantsRunning(""); err != nil {
			return err
		}
	}
	if tx.feature < LevelPendingInMemory && c.GetLevel() >= LevelPendingInMemory {
		if err := tx.dropPendingIndex(); err != nil {
			return err
		}
	}
	if tx.feature < LevelRunningInMemory && c.GetLevel() >= LevelRunningInMemory {
		if err := tx.dropRunningIndex(); err != nil {
			return err
		}
	}
	if tx.feature < LevelDelayedInMemory && c.GetLevel() >= LevelDelayedInMemory {
		if err := tx.dropDelayedIndex(); err != nil {
			return err
		}
	}
	if tx.feature < LevelExpiryInMemory && c.GetLevel() >= LevelExpiryInMemory {
		if err := tx.dropExpiryIndex(); err != nil {
			return err
		}
	}
	if tx.feature < LevelIdemInMemory && c.GetLevel() >= LevelIdemInMemory {
		if err := tx.dropIdemKeys(); err != nil {
			return err
		}
	}
	if err := tx.b.Set(storage.KeyFeature, storage.PutUint64(nil, uint64(c.GetLevel())), nil); err != nil {
		return fmt.Errorf("latch feature level %d: %w", c.GetLevel(), err)
	}
	tx.feature = c.GetLevel()
	return nil
}

// EnabledLevel is the feature level the cluster latched as of the last
// applied entry; 0 before the first latch.
func (f *FSM) EnabledLevel() uint32 { return f.feature.Load() }

// maxLevel is the highest level this FSM applies.
func (f *FSM) maxLevel() uint32 {
	if f.opts.MaxLevel != 0 {
		return min(f.opts.MaxLevel, FeatureLevel)
	}
	return BuildLevel()
}

// MaxLevel is the highest feature level this FSM applies: what its node
// announces to the others.
func (f *FSM) MaxLevel() uint32 { return f.maxLevel() }

// dropPendingIndex deletes every queue's pending index (q/…/p/) at the
// latch of LevelPendingInMemory: from then on the ready order is the only
// index of pending tasks, on every replica at the same entry.
func (tx *txn) dropPendingIndex() error {
	refs, err := tx.queuesWhere(func(m *storage.QueueMeta) bool { return m.Pending > 0 })
	if err != nil {
		return fmt.Errorf("drop the pending index: %w", err)
	}
	for ref := range refs {
		prefix := storage.PendingPrefix(ref.Queue, ref.Tenant)
		if err := tx.b.DeleteRange(prefix, storage.PrefixEnd(prefix), nil); err != nil {
			return fmt.Errorf("drop the pending index of %s/%s: %w", ref.Queue, ref.Tenant, err)
		}
	}
	return nil
}

// queuesWhere is every queue whose catalog record matches, and every queue
// this batch touched, whose records it writes only at its end: a queue
// made earlier in the batch is not in the catalog yet. A latch's
// migration deletes the index ranges of these.
func (tx *txn) queuesWhere(match func(m *storage.QueueMeta) bool) (map[QueueRef]bool, error) {
	refs := map[QueueRef]bool{}
	err := scanCatalog(tx.r, func(ref QueueRef, m *storage.QueueMeta) {
		if match(m) {
			refs[ref] = true
		}
	})
	if err != nil {
		return nil, err
	}
	for _, e := range tx.metas {
		refs[QueueRef{e.queue, e.tenant}] = true
	}
	return refs, nil
}
