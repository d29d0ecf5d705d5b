package fsm

import (
	"encoding/binary"
	"hash/fnv"
	"math/bits"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Retries, snooze, task updates and dead-letter retention
// (LevelRetries = 12). The rules of existing commands that change with it
// (requeue's backoff, a dead letter's expiry, the removal of an empty
// queue's catalog record) all ask tx.feature, so before the latch apply
// writes what a level-11 build writes.

// retryPolicy is the backoff that applies to t: its own, else its
// queue's; nil when neither has one.
func (tx *txn) retryPolicy(t *pb.Task) (*pb.RetryPolicy, error) {
	if p := t.GetRetry(); p.GetBaseNs() > 0 {
		return p, nil
	}
	cfg, err := storage.GetQueueConfig(tx.r, t.GetQueue(), t.GetTenant())
	if err != nil {
		return nil, err
	}
	if p := cfg.GetRetry(); p.GetBaseNs() > 0 {
		return p, nil
	}
	return nil, nil
}

// Backoff is how long a task waits after its n-th failed attempt (n >= 1)
// under p: min(cap, base * multiplier^(n-1)), less up to jitter_percent
// of it. The jitter's fraction is a hash of (id, n), so every replica, and
// every retry of the same apply, computes the same time, while tasks that
// failed together spread out. 0 when p has no base.
func Backoff(p *pb.RetryPolicy, id string, n uint32) int64 {
	base := p.GetBaseNs()
	if base <= 0 {
		return 0
	}
	limit := int64(MaxDelay)
	if c := p.GetCapNs(); c > 0 && c < limit {
		limit = c
	}
	d := min(base, limit)
	if m := int64(p.GetMultiplier()); m > 1 {
		// At most n-1 multiplications, and it stops at the cap: a loop
		// bounded by MaxAttemptsLimit that cannot overflow.
		for i := uint32(1); i < n && d < limit; i++ {
			if d > limit/m {
				d = limit
				break
			}
			d *= m
		}
		d = min(d, limit)
	}
	if j := min(p.GetJitterPercent(), 100); j > 0 {
		span := uint64(d) / 100 * uint64(j) // at most d, so no overflow below
		frac := jitterHash(id, n)
		cut, _ := bits.Mul64(span, frac) // span * frac / 2^64
		d -= int64(cut)
	}
	return d
}

// jitterHash is a 64-bit hash of (id, n): FNV-1a, fixed for all builds,
// since a change would change what apply writes.
func jitterHash(id string, n uint32) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], n)
	_, _ = h.Write(b[:])
	return h.Sum64()
}

// retryDelay is the delay of a task's requeue after a failed attempt:
// asked is the nack's own delay, which wins; without one, and from the
// latch on, the task's or its queue's backoff for attempt n.
func (tx *txn) retryDelay(t *pb.Task, asked int64, n uint32) (int64, error) {
	if asked > 0 || tx.feature < LevelRetries {
		return asked, nil
	}
	p, err := tx.retryPolicy(t)
	if err != nil || p == nil {
		return 0, err
	}
	return Backoff(p, t.GetId(), n), nil
}

// deadExpiry is when a task dead-lettered now leaves with retention's
// Purge; 0 before the latch, when dead letters were kept until replayed.
func (tx *txn) deadExpiry(t *pb.Task) (int64, error) {
	if tx.feature < LevelRetries {
		return 0, nil
	}
	cfg, err := storage.GetQueueConfig(tx.r, t.GetQueue(), t.GetTenant())
	if err != nil {
		return 0, err
	}
	keep := cfg.GetDeadRetentionNs()
	if keep <= 0 {
		keep = int64(pb.DefaultDeadRetention)
	}
	return addTime(tx.now, keep), nil
}

// setQueueRetry sets a queue's retry policy and dead-letter retention, or
// resets its whole configuration. A reset of a paused queue resumes it,
// and announces its pending tasks as a resume does.
func (tx *txn) setQueueRetry(c *pb.SetQueueRetryCmd, res *pb.CommandResult) error {
	q, tn := c.GetQueue(), c.GetTenant()
	old, err := storage.GetQueueConfig(tx.r, q, tn)
	if err != nil {
		return err
	}
	cfg := &pb.QueueConfig{}
	if !c.GetReset_() {
		cfg = proto.Clone(old).(*pb.QueueConfig)
		if c.GetHasRetry() {
			cfg.Retry = nil
			if c.GetRetry().GetBaseNs() > 0 {
				cfg.Retry = proto.Clone(c.GetRetry()).(*pb.RetryPolicy)
			}
		}
		if c.GetHasDeadRetention() {
			cfg.DeadRetentionNs = c.GetDeadRetentionNs()
		}
	}
	if proto.Equal(old, cfg) {
		res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_ALREADY_DONE})
		return nil
	}
	if err := tx.putConfig(q, tn, cfg); err != nil {
		return err
	}
	// Written like a pause: Stats lists a configured queue, and a reset
	// one with no task left is dropped at the command's end.
	m, err := tx.meta(q, tn, true)
	if err != nil {
		return err
	}
	if old.GetPaused() && !cfg.GetPaused() && m.Pending > 0 {
		tx.announcePending(q, tn)
	}
	res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_OK})
	return nil
}

// snooze hands a running task back for later without counting an
// attempt: its worker is not failing, it is waiting (on a resource, a
// rate limit). The attempt ends SNOOZED.
func (tx *txn) snooze(c *pb.SnoozeCmd, res *pb.CommandResult) error {
	return tx.handBack(c.GetTaskId(), c.GetFence(), c.GetTenant(), "the worker snoozed it", res, func(t *pb.Task) error {
		mutate := func(t *pb.Task) {
			tx.closeAttempt(t, pb.AttemptOutcome_ATTEMPT_OUTCOME_SNOOZED, "")
			t.WorkerId = ""
		}
		if d := c.GetDelayNs(); d > 0 {
			return tx.move(t, pb.TaskState_TASK_STATE_DELAYED, func(t *pb.Task) {
				mutate(t)
				t.VisibleAt = addTime(tx.now, d)
			})
		}
		return tx.move(t, pb.TaskState_TASK_STATE_PENDING, func(t *pb.Task) {
			mutate(t)
			t.Seq = tx.nextSeq(0)
			t.VisibleAt = tx.now
		})
	})
}

// updateTask changes a waiting task's priority or run-at. A running task
// is its worker's and a finished one is history: both WRONG_STATE, which
// callers branch on. A changed priority or a task that becomes pending
// goes to the back of its priority, as a newly enqueued task would.
func (tx *txn) updateTask(c *pb.UpdateTaskCmd, res *pb.CommandResult) error {
	t, ok, err := tx.getTaskOf(c.GetTaskId(), c.GetTenant())
	if err != nil {
		return err
	}
	if !ok {
		res.Items = append(res.Items, item(pb.Code_CODE_NOT_FOUND, c.GetTaskId(), nil, "no such task"))
		return nil
	}
	st := t.GetState()
	if st != pb.TaskState_TASK_STATE_PENDING && st != pb.TaskState_TASK_STATE_DELAYED {
		res.Items = append(res.Items, item(pb.Code_CODE_WRONG_STATE, t.GetId(), t, "only pending or delayed tasks can be changed"))
		return nil
	}
	prio, visible := t.GetPriority(), t.GetVisibleAt()
	if c.GetHasPriority() {
		prio = c.GetPriority()
	}
	if c.GetRunAt() > 0 {
		visible = c.GetRunAt()
	}
	to := pb.TaskState_TASK_STATE_PENDING
	if visible > tx.now {
		to = pb.TaskState_TASK_STATE_DELAYED
	}
	if prio == t.GetPriority() && to == st && (st == pb.TaskState_TASK_STATE_PENDING || visible == t.GetVisibleAt()) {
		res.Items = append(res.Items, item(pb.Code_CODE_ALREADY_DONE, t.GetId(), t, ""))
		return nil
	}
	err = tx.move(t, to, func(t *pb.Task) {
		t.Priority = prio
		t.VisibleAt = visible
		if to == pb.TaskState_TASK_STATE_PENDING {
			t.VisibleAt = min(visible, tx.now)
			t.Seq = tx.nextSeq(0)
		}
	})
	if err != nil {
		return err
	}
	res.Items = append(res.Items, item(pb.Code_CODE_OK, t.GetId(), t, ""))
	return nil
}

// dropEmptyQueues removes, at the end of each command from the latch on,
// the catalog record of a queue this command left with no task in any
// state and no configuration: Stats stops listing it, and a queue name
// used once costs nothing forever. Its lifetime totals go with it; a queue
// that gets a task again starts from zero. Per command, like the record's
// dirty mark, so the keyspace does not depend on how entries are batched:
// the next command sees the queue as absent, as a new batch would.
func (tx *txn) dropEmptyQueues() error {
	if tx.feature < LevelRetries {
		return nil
	}
	for _, e := range tx.metas {
		m := &e.m
		if !e.touched || m.Pending|m.Delayed|m.Running|m.Dead|m.Finished != 0 {
			continue
		}
		// WAITING tasks (LevelDependencies) are counted apart from the
		// catalog (j/n/): a queue of waiting tasks is not empty.
		waiting, err := storage.GetWaitingCount(tx.r, e.queue, e.tenant)
		if err != nil {
			return err
		}
		if waiting > 0 {
			continue
		}
		cfg, err := storage.GetQueueConfig(tx.r, e.queue, e.tenant)
		if err != nil {
			return err
		}
		if proto.Size(cfg) > 0 {
			continue
		}
		e.m, e.dirty, e.dropped, e.touched = storage.QueueMeta{}, false, true, false
	}
	return nil
}

// validateRetries checks the commands of LevelRetries.
func validateRetries(cmd *pb.Command, at int64) error {
	switch cmd.GetType() {
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_RETRY:
		c := cmd.GetSetQueueRetry()
		if err := checkQueue("", c.GetQueue(), c.GetTenant()); err != nil {
			return err
		}
		if c.GetReset_() && (c.GetHasRetry() || c.GetHasDeadRetention()) {
			return fieldErr("reset", "a reset sets nothing else")
		}
		if err := checkRetryPolicy("retry.", c.GetRetry()); err != nil {
			return err
		}
		return checkDuration("dead_retention_ns", c.GetDeadRetentionNs(), MaxRetention)
	case pb.CommandType_COMMAND_TYPE_SNOOZE:
		c := cmd.GetSnooze()
		if err := checkTaskRef("", c.GetTaskId(), c.GetFence()); err != nil {
			return err
		}
		if err := checkTenantRef(c.GetTenant()); err != nil {
			return err
		}
		return checkDuration("delay_ns", c.GetDelayNs(), MaxDelay)
	case pb.CommandType_COMMAND_TYPE_UPDATE_TASK:
		c := cmd.GetUpdateTask()
		if err := checkLen("task_id", c.GetTaskId(), 1, MaxIDLen); err != nil {
			return err
		}
		if err := checkTenantRef(c.GetTenant()); err != nil {
			return err
		}
		if c.GetPriority() > MaxPriority || (!c.GetHasPriority() && c.GetPriority() != 0) {
			return fieldErr("priority", "%d not in 0..%d, or given without has_priority", c.GetPriority(), MaxPriority)
		}
		if !c.GetHasPriority() && c.GetRunAt() == 0 {
			return fieldErr("run_at", "nothing to change: give a priority or a run_at")
		}
		return checkRunAt(c.GetRunAt(), at)
	}
	return fieldErr("type", "not a retries command: %v", cmd.GetType())
}

// checkRetryPolicy bounds a policy so that its delays stay within
// MaxDelay; nil is no policy.
func checkRetryPolicy(prefix string, p *pb.RetryPolicy) error {
	if p == nil {
		return nil
	}
	if err := checkDuration(prefix+"base_ns", p.GetBaseNs(), MaxDelay); err != nil {
		return err
	}
	if err := checkDuration(prefix+"cap_ns", p.GetCapNs(), MaxDelay); err != nil {
		return err
	}
	if p.GetCapNs() > 0 && p.GetCapNs() < p.GetBaseNs() {
		return fieldErr(prefix+"cap_ns", "%d is below base_ns %d", p.GetCapNs(), p.GetBaseNs())
	}
	if p.GetMultiplier() > MaxMultiplier {
		return fieldErr(prefix+"multiplier", "%d > %d", p.GetMultiplier(), MaxMultiplier)
	}
	if p.GetJitterPercent() > 100 {
		return fieldErr(prefix+"jitter_percent", "%d > 100", p.GetJitterPercent())
	}
	return nil
}

// MaxMultiplier bounds a retry policy's multiplier: past it the second
// delay is already at any cap worth setting.
const MaxMultiplier = 1000

// ListTenantDead pages through the dead letters of every queue of tenant
// (storage.ListTenantDead), from one Pebble snapshot.
func (f *FSM) ListTenantDead(tenant, cursor string, limit int) ([]*pb.Task, string, error) {
	r, release, err := f.view()
	if err != nil {
		return nil, "", err
	}
	defer release()
	return pageErr(storage.ListTenantDead(r, tenant, cursor, limit, AnswerBudget))
}
