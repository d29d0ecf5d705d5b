package fsm

import (
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/proto/taskwire"
	"github.com/dockethq/docket/storage"
)

// Per-tenant limits. The leader stamps its configured limits into every
// Enqueue (StampTenantLimits), as it stamps now, and the FSM enforces the
// stamped values against counters kept in the keyspace (u/<tenant>), so
// every replica refuses the same items whatever its own configuration.

// StampTenantLimits sets limits on every Enqueue of cmd, also inside a
// Batch, and on a FireSchedule, replacing what a caller may have put there. Zero limits (no
// limit) are stamped as none, so that a node without limits writes the
// same entries as before they existed.
func StampTenantLimits(cmd *pb.Command, maxTasks, maxBytes uint64) {
	var l *pb.TenantLimits
	if maxTasks > 0 || maxBytes > 0 {
		l = &pb.TenantLimits{MaxTasks: maxTasks, MaxBytes: maxBytes}
	}
	if e := cmd.GetEnqueue(); e != nil {
		e.Limits = l
	}
	if fs := cmd.GetFireSchedule(); fs != nil {
		fs.Limits = l
	}
	for _, sub := range cmd.GetBatch().GetCommands() {
		if e := sub.GetEnqueue(); e != nil {
			e.Limits = l
		}
	}
}

type tenantEntry struct {
	u storage.TenantUsage
	// dirty is set by the first change; a change is a non-zero delta, made
	// by a command whatever the batching, so the keyspace does not depend
	// on how entries are grouped.
	dirty bool
}

// usage returns the usage record of tenant, read once per batch.
func (tx *txn) usage(tenant string) (*tenantEntry, error) {
	e, ok := tx.tenants[tenant]
	if !ok {
		u, err := storage.GetTenantUsage(tx.r, tenant)
		if err != nil {
			return nil, fmt.Errorf("tenant %s usage: %w", tenant, err)
		}
		e = &tenantEntry{u: u}
		tx.tenants[tenant] = e
	}
	return e, nil
}

// countTenant changes tenant's usage by (tasks, bytes).
func (tx *txn) countTenant(tenant string, tasks, bytes int64) error {
	if tasks == 0 && bytes == 0 {
		return nil
	}
	e, err := tx.usage(tenant)
	if err != nil {
		return err
	}
	e.u.Add(tasks, bytes)
	e.dirty = true
	return nil
}

// overLimit says why storing a new task of size bytes would take tenant
// past lim, or "" when it fits (or lim sets no limit).
func (tx *txn) overLimit(tenant string, lim *pb.TenantLimits, size int) (string, error) {
	if lim.GetMaxTasks() == 0 && lim.GetMaxBytes() == 0 {
		return "", nil
	}
	e, err := tx.usage(tenant)
	if err != nil {
		return "", err
	}
	switch u := e.u; {
	case lim.GetMaxTasks() > 0 && u.Tasks+1 > lim.GetMaxTasks():
		return fmt.Sprintf("tenant %s stores %d tasks, its limit is %d: retry once tasks finish and are purged",
			tenant, u.Tasks, lim.GetMaxTasks()), nil
	case lim.GetMaxBytes() > 0 && u.Bytes+uint64(size) > lim.GetMaxBytes():
		return fmt.Sprintf("tenant %s stores %d bytes, a task of %d would pass its limit of %d: retry once tasks finish and are purged",
			tenant, u.Bytes, size, lim.GetMaxBytes()), nil
	}
	return "", nil
}

// taskBytes is what a stored task counts against its tenant's bytes: its
// encoded record.
func taskBytes(t *pb.Task) int64 { return int64(taskwire.Size(t)) }
