package storage

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Stats returns the counters of every queue and tenant matching the filter
// (empty matches all), with the enqueue time of the oldest pending head.
func Stats(r Reader, queue, tenant string) ([]*pb.QueueStats, error) {
	out, _, err := StatsPage(r, queue, tenant, "", 0)
	return out, err
}

// PendingHeads returns the id of the first pending task of each priority
// of a queue that has one, in any order. Below fsm's LevelPendingInMemory
// the pending index (q/…/p/) answers it; from that level on only apply's
// ready order can.
type PendingHeads func(queue, tenant string) ([]string, error)

// StatsPage is Stats from after cursor (a next cursor it returned for the
// same filter), stopping before the entry that would take the page past
// maxBytes (at least one entry; <= 0: no bound). next is empty at the end.
// The oldest pending task is found in the pending index.
func StatsPage(r Reader, queue, tenant, cursor string, maxBytes int) (out []*pb.QueueStats, next string, err error) {
	return StatsPageHeads(r, queue, tenant, cursor, maxBytes, nil)
}

// StatsPageHeads is StatsPage with the heads of each queue's priorities
// taken from heads; nil reads them from the pending index.
func StatsPageHeads(r Reader, queue, tenant, cursor string, maxBytes int, heads PendingHeads) (out []*pb.QueueStats, next string, err error) {
	prefix := CatalogPrefix(queue)
	lower := prefix
	if cursor != "" {
		key, err := decodeCursor(cursor, prefix, func(k []byte) error { _, _, err := ParseCatalogKey(k); return err })
		if err != nil {
			return nil, "", fmt.Errorf("stats %s: %w", queue, err)
		}
		lower = append(key, 0) // strictly after the cursor's key
	}
	page := pageBudget{maxBytes: maxBytes}
	err = Scan(r, lower, PrefixEnd(prefix), 0, func(k, v []byte) error {
		q, t, err := ParseCatalogKey(k)
		if err != nil {
			return err
		}
		if tenant != "" && t != tenant {
			return nil
		}
		m, err := UnmarshalQueueMeta(v)
		if err != nil {
			return fmt.Errorf("stats %s/%s: %w", q, t, err)
		}
		s := &pb.QueueStats{
			Queue: q, Tenant: t,
			Pending: m.Pending, Delayed: m.Delayed, Running: m.Running,
			Dead: m.Dead, Completed: m.Finished,
			OldestPendingAt: -1, // counted at its largest: set below
		}
		if tt := m.Totals; tt != nil {
			s.Totals = &pb.QueueTotals{Enqueued: tt.Enqueued, Claimed: tt.Claimed, Completed: tt.Completed, Failed: tt.Failed,
				Cancelled: tt.Cancelled, DeadLettered: tt.DeadLettered, Requeued: tt.Requeued, LeaseExpired: tt.Expired, Released: tt.Released}
		}
		if !page.take(s, k) {
			next = page.cursor()
			return ErrStop
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("stats: %w", err)
	}
	for _, s := range out {
		cfg, err := GetQueueConfig(r, s.Queue, s.Tenant)
		if err != nil {
			return nil, "", err
		}
		s.Paused = cfg.GetPaused()
		if s.Waiting, err = GetWaitingCount(r, s.Queue, s.Tenant); err != nil {
			return nil, "", err
		}
		s.MaxRunning, s.RateMilli, s.Burst = cfg.GetMaxRunning(), cfg.GetRateMilli(), cfg.GetBurst()
		s.MaxRunningPerKey, s.Order = cfg.GetMaxRunningPerKey(), cfg.GetOrder()
		s.PerKeyPending, s.PerKeyPendingDepth = cfg.GetPerKeyPending(), cfg.GetPerKeyPendingDepth()
		s.OldestPendingAt = 0
		if s.Pending == 0 {
			continue
		}
		oldest, err := oldestPending(r, s.Queue, s.Tenant, heads)
		if err != nil {
			return nil, "", err
		}
		s.OldestPendingAt = oldest
	}
	return out, next, nil
}

// oldestPending is the earliest created_at among the heads of each priority:
// how long the next task a worker will see has been in the system.
func oldestPending(r Reader, queue, tenant string, heads PendingHeads) (int64, error) {
	if heads == nil {
		heads = indexHeads(r)
	}
	ids, err := heads(queue, tenant)
	if err != nil {
		return 0, err
	}
	var oldest int64
	for _, id := range ids {
		t, _, err := GetTaskHeader(r, id)
		if err != nil {
			return 0, err
		}
		if oldest == 0 || t.GetCreatedAt() < oldest {
			oldest = t.GetCreatedAt()
		}
	}
	return oldest, nil
}

// indexHeads answers PendingHeads from the pending index of r.
func indexHeads(r Reader) PendingHeads {
	return func(queue, tenant string) ([]string, error) {
		m, err := GetQueueMeta(r, queue, tenant)
		if err != nil {
			return nil, err
		}
		var ids []string
		for p := uint32(0); p < Priorities; p++ {
			id, _, ok, err := FirstPending(r, queue, tenant, p, m.Head[p])
			if err != nil {
				return nil, err
			}
			if ok {
				ids = append(ids, id)
			}
		}
		return ids, nil
	}
}

// FirstPending returns the head of one priority's pending range, seeking
// from the head hint.
func FirstPending(r Reader, queue, tenant string, prio uint32, fromSeq uint64) (id string, seq uint64, ok bool, err error) {
	prefix := PendingPrioPrefix(queue, tenant, prio)
	err = Scan(r, PendingSeek(queue, tenant, prio, fromSeq), PrefixEnd(prefix), 1, func(k, _ []byte) error {
		s, i, perr := ParsePendingKey(k, len(prefix))
		if perr != nil {
			return perr
		}
		id, seq, ok = i, s, true
		return nil
	})
	return id, seq, ok, err
}

// ListTasks lists one queue's tasks in a state, in index order, starting
// after cursor (a next cursor it returned for the same queue, tenant and
// state; anything else is ErrBadCursor). It returns the next cursor, empty
// at the end. Terminal states other than dead have no per-queue index.
// The page stops at limit tasks, or before the task that would take the
// encoded tasks past maxBytes (each counted with 5 bytes of framing); it
// always holds one task when one is left. maxBytes <= 0 means no bound.
func ListTasks(r Reader, queue, tenant string, state pb.TaskState, cursor string, limit, maxBytes int) ([]*pb.Task, string, error) {
	return ListTasksWalk(r, queue, tenant, state, cursor, limit, maxBytes, nil)
}

// IndexWalk walks the keys of one state's index of one queue in order,
// from lower (inclusive) to the end of the range, calling fn for each;
// fn's ErrStop ends the walk with nil, as it ends a Scan. Its keys are the
// index's keys, present or synthesized with the same bytes.
type IndexWalk func(lower []byte, fn func(key []byte) error) error

// ListTasksWalk is ListTasks over the index keys walk gives; nil scans
// the index in r. From fsm's LevelPendingInMemory on, the pending index
// is not stored and fsm walks its ready order instead; cursors keep the
// index keys' bytes either way.
func ListTasksWalk(r Reader, queue, tenant string, state pb.TaskState, cursor string, limit, maxBytes int, walk IndexWalk) ([]*pb.Task, string, error) {
	var prefix []byte
	switch state {
	case pb.TaskState_TASK_STATE_PENDING:
		prefix = PendingPrefix(queue, tenant)
	case pb.TaskState_TASK_STATE_DELAYED:
		prefix = DelayedPrefix(queue, tenant)
	case pb.TaskState_TASK_STATE_RUNNING:
		prefix = RunningPrefix(queue, tenant)
	case pb.TaskState_TASK_STATE_DEAD:
		prefix = DeadPrefix(queue, tenant)
	case pb.TaskState_TASK_STATE_WAITING:
		prefix = WaitingPrefix(queue, tenant)
	default:
		return nil, "", fmt.Errorf("list %s: state has no per-queue index", state)
	}
	lower := prefix
	if cursor != "" {
		// A cursor names a key of this very range. Any other would move
		// the scan's lower bound out of the prefix and list other tenants'
		// keys (found by Test_ListTasksRefusesForeignCursor), so it is
		// refused.
		key, err := decodeCursor(cursor, prefix, func(k []byte) error {
			_, err := idFromIndexKey(k, len(prefix), state)
			return err
		})
		if err != nil {
			return nil, "", fmt.Errorf("list %s/%s %s: %w", queue, tenant, state, err)
		}
		lower = append(key, 0) // strictly after the cursor's key
	}
	if limit <= 0 {
		limit = pb.DefaultListLimit
	}
	var tasks []*pb.Task
	page := pageBudget{maxBytes: maxBytes}
	full := false // stopped by limit or maxBytes, not by the end
	if walk == nil {
		walk = func(lower []byte, fn func(key []byte) error) error {
			return Scan(r, lower, PrefixEnd(prefix), limit+1, func(k, _ []byte) error { return fn(k) })
		}
	}
	err := walk(lower, func(k []byte) error {
		if len(tasks) == limit {
			full = true
			return ErrStop
		}
		id, err := idFromIndexKey(k, len(prefix), state)
		if err != nil {
			return err
		}
		t, err := GetTask(r, id)
		if err != nil {
			return err
		}
		if !page.take(t, k) {
			full = true
			return ErrStop
		}
		tasks = append(tasks, t)
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list %s/%s %s: %w", queue, tenant, state, err)
	}
	next := ""
	if full {
		next = page.cursor()
	}
	return tasks, next, nil
}

// listFraming is the tag and length prefix of one element of a repeated
// message field: 1 byte of tag, at most 4 of length.
const listFraming = 5

// pageBudget counts one listing page's encoded bytes against maxBytes
// (<= 0: no bound). The first item always fits, so a page is never empty
// while items are left.
type pageBudget struct {
	maxBytes, used, items int
	last                  []byte // the key of the last item taken, for the cursor
}

// take reports whether an item of m's size fits, and counts it under key
// if so.
func (p *pageBudget) take(m proto.Message, key []byte) bool {
	n := proto.Size(m) + listFraming
	if p.maxBytes > 0 && p.items > 0 && p.used+n > p.maxBytes {
		return false
	}
	p.used += n
	p.items++
	p.last = append(p.last[:0], key...)
	return true
}

// cursor is the cursor of the page after the last item taken.
func (p *pageBudget) cursor() string { return encodeCursor(p.last) }

func idFromIndexKey(k []byte, prefixLen int, state pb.TaskState) (string, error) {
	switch state {
	case pb.TaskState_TASK_STATE_PENDING:
		// <255-prio> / <seq 8> / <id>
		if len(k) < prefixLen+2+9 {
			return "", fmt.Errorf("pending key %q: malformed", k)
		}
		_, id, err := ParsePendingKey(k, prefixLen+2)
		return id, err
	case pb.TaskState_TASK_STATE_DELAYED:
		_, id, err := parseTimeIndexKey(k, prefixLen)
		return id, err
	default:
		return string(k[prefixLen:]), nil
	}
}
