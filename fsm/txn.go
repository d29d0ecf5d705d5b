package fsm

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// txn is one ApplyBatch: an indexed Pebble batch (so a later command in the
// batch sees an earlier one's writes), the catalog records it touched, and
// the effective time.
type txn struct {
	// b is apply's only writer: the batch, with the hot records of the
	// recent-record cache written through (recent.go).
	b applyWriter
	r storage.Reader
	// w is where task records are written (putTask, deleteTask): the
	// batch, and the recent-record cache when it is on (recent.go).
	w     storage.Writer
	now   int64
	index uint64 // index of the entry being applied
	// base is the first task position of the command being applied: 0,
	// or its range within a Batch entry.
	base int

	metas     map[QueueRef]*metaEntry
	tenants   map[string]*tenantEntry
	pendingEv map[QueueRef]bool
	ev        Event
	checks    []CheckEvent // accepted CheckResult entries, in log order
	// feature is the latched feature level as of this batch.
	feature uint32
	// clusterID is the id this batch set, if it set one (identity.go).
	clusterID string
	// formats is how each task this batch read or wrote is stored, so a
	// write of a split record skips its body when v/ holds it already.
	formats map[string]storage.RecordFormat
	// uncachedRecords are the tasks whose record the recent-record cache
	// holds no value of: this batch took their header from the header
	// cache (headers.go). nil until used.
	uncachedRecords map[string]bool
	deps            depsState // parents whose end still visits children (rules_deps.go)
	// ready is the pending order in memory (ready.go); nil when off.
	ready *readyOrder
	// configs is what the claim view takes from the batch once it commits
	// beside the catalog records (claimview.go): the configuration records
	// written. nil until used.
	configs map[QueueRef]*pb.QueueConfig
	// keyed is the per-key state of keyed queues (keyed.go); touchedKeys
	// the keys the command being applied changed, and turnPos the tasks
	// its entry's claims took from them so far.
	keyed       *keyedSet
	touchedKeys []touchedKey
	turnPos     uint64
}

type metaEntry struct {
	queue, tenant string
	m             storage.QueueMeta
	// dirty is set by the first command that changes the record. Only
	// dirty records are written, so a claim that finds nothing leaves no
	// catalog record behind (found by Test_EmptyClaimLeavesNoTrace). It
	// tracks changes made, not value differences, so that the keyspace is
	// the same however entries are grouped into apply batches.
	dirty bool
	// dropped: a command left the queue empty and unconfigured
	// (dropEmptyQueues), so finish deletes its record unless a later
	// command of the batch wrote it again.
	dropped bool
	// touched: written by the command being applied. Empty-queue removal
	// looks at these only, so what a command leaves does not depend on
	// which other commands share its apply batch (dirty is batch-wide).
	touched bool
}

func newTxn(b *pebble.Batch, now int64) *txn {
	return &txn{
		b:       applyWriter{b: b},
		r:       storage.Wrap(b),
		w:       b,
		now:     now,
		metas:   map[QueueRef]*metaEntry{},
		tenants: map[string]*tenantEntry{},
		formats: map[string]storage.RecordFormat{},
	}
}

// apply runs one decoded command. A business rejection is a result; an
// error means storage failed and the caller stops the node.
func (tx *txn) apply(index uint64, cmd *pb.Command) (*pb.CommandResult, error) {
	res := &pb.CommandResult{Index: index}
	if rejected, err := tx.reject(cmd, res); err != nil || rejected {
		res.Now = tx.now
		return res, err
	}
	if index != tx.index {
		tx.turnPos = 0
	}
	tx.index, tx.base = index, 0
	if cmd.GetNow() > tx.now {
		tx.now = cmd.GetNow() // time in the log never runs backwards
	}
	res.Now = tx.now
	if err := tx.run(cmd, res); err != nil {
		return nil, err
	}
	return res, nil
}

// reject fills res with the reason when cmd is invalid.
// Times are judged at the time the command runs: max(last now, cmd.now),
// which for a Batch's commands is the batch's.
func (tx *txn) reject(cmd *pb.Command, res *pb.CommandResult) (bool, error) {
	dropUnlatched(cmd, tx.feature)
	err := validateAt(cmd, fsmLimits, max(tx.now, cmd.GetNow()))
	if err == nil {
		return false, nil
	}
	var fe *pb.FieldError
	if !errors.As(err, &fe) {
		return false, err
	}
	fe.Fill(res)
	return true, nil
}

// run dispatches a valid command to its rule.
func (tx *txn) run(cmd *pb.Command, res *pb.CommandResult) error {
	var err error
	if cmd.GetType() != pb.CommandType_COMMAND_TYPE_BATCH {
		for _, e := range tx.metas {
			e.touched = false
		}
	}
	switch cmd.GetType() {
	case pb.CommandType_COMMAND_TYPE_ENQUEUE:
		err = tx.enqueue(cmd.GetEnqueue(), res)
	case pb.CommandType_COMMAND_TYPE_CLAIM:
		err = tx.claim(cmd.GetClaim(), res)
	case pb.CommandType_COMMAND_TYPE_HEARTBEAT:
		err = tx.heartbeat(cmd.GetHeartbeat(), res)
	case pb.CommandType_COMMAND_TYPE_SUBMIT:
		err = tx.submit(cmd.GetSubmit(), res)
	case pb.CommandType_COMMAND_TYPE_NACK:
		err = tx.nack(cmd.GetNack(), res)
	case pb.CommandType_COMMAND_TYPE_CANCEL:
		err = tx.cancel(cmd.GetCancel(), res)
	case pb.CommandType_COMMAND_TYPE_REAP:
		err = tx.reap(cmd.GetReap(), res)
	case pb.CommandType_COMMAND_TYPE_PROMOTE_DELAYED:
		err = tx.promoteDelayed(cmd.GetPromoteDelayed(), res)
	case pb.CommandType_COMMAND_TYPE_PURGE:
		err = tx.purge(cmd.GetPurge(), res)
	case pb.CommandType_COMMAND_TYPE_REQUEUE_DEAD:
		err = tx.requeueDead(cmd.GetRequeueDead(), res)
	case pb.CommandType_COMMAND_TYPE_BATCH:
		err = tx.batch(cmd.GetBatch(), res)
	case pb.CommandType_COMMAND_TYPE_RELEASE:
		err = tx.release(cmd.GetRelease(), res)
	case pb.CommandType_COMMAND_TYPE_CREATE_TOKEN:
		err = tx.createToken(cmd.GetCreateToken(), res)
	case pb.CommandType_COMMAND_TYPE_REVOKE_TOKEN:
		err = tx.revokeToken(cmd.GetRevokeToken(), res)
	case pb.CommandType_COMMAND_TYPE_CHECK:
		// Nothing to write: ApplyBatch hands out the snapshot (check.go).
	case pb.CommandType_COMMAND_TYPE_CHECK_RESULT:
		tx.checkResult(cmd.GetCheckResult(), res)
	case pb.CommandType_COMMAND_TYPE_SET_FEATURE_LEVEL:
		err = tx.setFeatureLevel(cmd.GetSetFeatureLevel())
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_PAUSED:
		err = tx.setQueuePaused(cmd.GetSetQueuePaused(), res)
	case pb.CommandType_COMMAND_TYPE_PURGE_QUEUE:
		err = tx.purgeQueue(cmd.GetPurgeQueue(), res)
	case pb.CommandType_COMMAND_TYPE_PUT_SCHEDULE:
		err = tx.putSchedule(cmd.GetPutSchedule(), res)
	case pb.CommandType_COMMAND_TYPE_REMOVE_SCHEDULE:
		err = tx.removeSchedule(cmd.GetRemoveSchedule(), res)
	case pb.CommandType_COMMAND_TYPE_FIRE_SCHEDULE:
		err = tx.fireSchedule(cmd.GetFireSchedule(), res)
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_RETRY:
		err = tx.setQueueRetry(cmd.GetSetQueueRetry(), res)
	case pb.CommandType_COMMAND_TYPE_SNOOZE:
		err = tx.snooze(cmd.GetSnooze(), res)
	case pb.CommandType_COMMAND_TYPE_UPDATE_TASK:
		err = tx.updateTask(cmd.GetUpdateTask(), res)
	case pb.CommandType_COMMAND_TYPE_TIME_OUT:
		err = tx.timeOut(cmd.GetTimeOut(), res)
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS:
		err = tx.setQueueLimits(plantLimit(cmd.GetSetQueueLimits()), res)
	case pb.CommandType_COMMAND_TYPE_SET_CLUSTER_ID:
		err = tx.setClusterID(cmd.GetSetClusterId())
	case pb.CommandType_COMMAND_TYPE_SET_KEY_LIMIT:
		err = tx.setKeyLimit(cmd.GetSetKeyLimit(), res)
	default:
		// Validate already refused unknown types; DecodeCommand stops the
		// node before it gets here.
		return fmt.Errorf("%w: %d", ErrUnknownCommand, cmd.GetType())
	}
	if err == nil && cmd.GetType() != pb.CommandType_COMMAND_TYPE_BATCH {
		tx.settleKeys()
		err = tx.dropEmptyQueues() // a Batch's commands did, each
	}
	if err != nil {
		return fmt.Errorf("%v: %w", cmd.GetType(), err)
	}
	return nil
}

// finish writes the touched catalog records, by queue and tenant, and the
// metadata of the batch.
func (tx *txn) finish(applied uint64) error {
	for i := range tx.ev.Pending {
		c := &tx.ev.Pending[i]
		if e := tx.metas[c.QueueRef]; e != nil {
			c.Pending = e.m.Pending
		}
	}
	refs := slices.SortedFunc(maps.Keys(tx.metas), func(a, b QueueRef) int {
		return cmp.Or(strings.Compare(a.Queue, b.Queue), strings.Compare(a.Tenant, b.Tenant))
	})
	for _, ref := range refs {
		e := tx.metas[ref]
		if !e.dirty {
			if e.dropped {
				if err := tx.b.Delete(storage.CatalogKey(e.queue, e.tenant), nil); err != nil {
					return fmt.Errorf("catalog %s/%s: %w", e.queue, e.tenant, err)
				}
			}
			continue
		}
		if err := storage.PutQueueMeta(&tx.b, e.queue, e.tenant, &e.m); err != nil {
			return fmt.Errorf("catalog %s/%s: %w", e.queue, e.tenant, err)
		}
	}
	tenants := make([]string, 0, len(tx.tenants))
	for tn, e := range tx.tenants {
		if e.dirty {
			tenants = append(tenants, tn)
		}
	}
	sort.Strings(tenants)
	for _, tn := range tenants {
		if err := storage.PutTenantUsage(&tx.b, tn, &tx.tenants[tn].u); err != nil {
			return fmt.Errorf("tenant %s usage: %w", tn, err)
		}
	}
	if err := tx.writeKeys(); err != nil {
		return err
	}
	if err := storage.SetUint64(&tx.b, storage.KeyApplied, applied); err != nil {
		return err
	}
	return storage.SetUint64(&tx.b, storage.KeyNow, storage.TimeKey(tx.now))
}

// meta returns the catalog record of a queue, read once per batch. forWrite
// marks it to be written back; a reader that changes it must also have
// moved a task, which marks it.
func (tx *txn) meta(queue, tenant string, forWrite bool) (*storage.QueueMeta, error) {
	k := QueueRef{Queue: queue, Tenant: tenant} // no key built: nearly every command asks
	e, ok := tx.metas[k]
	if !ok {
		m, err := storage.GetQueueMeta(tx.r, queue, tenant)
		if err != nil {
			return nil, fmt.Errorf("catalog %s/%s: %w", queue, tenant, err)
		}
		e = &metaEntry{queue: queue, tenant: tenant, m: m}
		tx.metas[k] = e
	}
	e.dirty = e.dirty || forWrite
	e.touched = e.touched || forWrite
	return &e.m, nil
}

// indexKeys are the keys that point at t in its current state. From
// LevelPendingInMemory on a pending task has none: the ready order is its
// index; from LevelRunningInMemory on a running task has none either,
// from LevelDelayedInMemory on a delayed one, and from LevelExpiryInMemory
// on a finished one, and a dead letter keeps only its dead key.
func (tx *txn) indexKeys(t *pb.Task) [][]byte {
	q, tn, id := t.GetQueue(), t.GetTenant(), t.GetId()
	switch t.GetState() {
	case pb.TaskState_TASK_STATE_PENDING:
		if tx.feature >= LevelPendingInMemory {
			return nil
		}
		return [][]byte{storage.PendingKey(q, tn, t.GetPriority(), t.GetSeq(), id)}
	case pb.TaskState_TASK_STATE_DELAYED:
		if tx.feature >= LevelDelayedInMemory {
			return nil
		}
		return [][]byte{storage.DelayedKey(q, tn, t.GetVisibleAt(), id), storage.WakeKey(t.GetVisibleAt(), id)}
	case pb.TaskState_TASK_STATE_RUNNING:
		if tx.feature >= LevelRunningInMemory {
			return nil
		}
		if d := t.GetDeadlineAt(); d > 0 { // a claim with an execution timeout (rules_cancel.go)
			return [][]byte{storage.RunningKey(q, tn, id), storage.LeaseKey(t.GetLeaseUntil(), id), storage.DeadlineKey(d, id)}
		}
		return [][]byte{storage.RunningKey(q, tn, id), storage.LeaseKey(t.GetLeaseUntil(), id)}
	case pb.TaskState_TASK_STATE_DEAD:
		if t.GetExpireAt() > 0 && tx.feature < LevelExpiryInMemory { // dead-lettered since LevelRetries
			return [][]byte{storage.DeadKey(q, tn, id), storage.ExpireKey(t.GetExpireAt(), id)}
		}
		return [][]byte{storage.DeadKey(q, tn, id)}
	case pb.TaskState_TASK_STATE_WAITING:
		return [][]byte{storage.WaitingKey(q, tn, id)}
	case pb.TaskState_TASK_STATE_COMPLETED, pb.TaskState_TASK_STATE_FAILED, pb.TaskState_TASK_STATE_CANCELLED:
		if tx.feature >= LevelExpiryInMemory {
			return nil
		}
		return [][]byte{storage.ExpireKey(t.GetExpireAt(), id)}
	}
	return nil
}

// move is the only way a stored task changes: it drops the index keys of
// the old state, lets mutate change fields (seq, lease, times), sets the new
// state, writes the new index keys and the record, and keeps the counters
// in step. A task is therefore never in two indexes at once.
func (tx *txn) move(t *pb.Task, to pb.TaskState, mutate func(*pb.Task)) error {
	return tx.moveSized(t, taskBytes(t), to, mutate)
}

// moveSized is move for a caller that has counted taskBytes(t) already
// (a claim, for its answer's budget).
func (tx *txn) moveSized(t *pb.Task, before int64, to pb.TaskState, mutate func(*pb.Task)) error {
	from := t.GetState()
	tx.ready.remove(t) // before mutate changes its seq, priority, times or lease
	tx.keyedLeave(t)
	for _, k := range tx.indexKeys(t) {
		if err := tx.b.Delete(k, nil); err != nil {
			return fmt.Errorf("move %s: %w", t.GetId(), err)
		}
	}
	if mutate != nil {
		mutate(t)
	}
	t.State = to
	return tx.write(t, from, before)
}

// write stores a task that is new (from UNSPECIFIED) or moved; before is
// the bytes of its record before the move (0 when new), for its tenant's
// usage.
func (tx *txn) write(t *pb.Task, from pb.TaskState, before int64) error {
	for _, k := range tx.indexKeys(t) {
		if err := storage.SetIndex(&tx.b, k); err != nil {
			return fmt.Errorf("index %s: %w", t.GetId(), err)
		}
	}
	m, err := tx.meta(t.GetQueue(), t.GetTenant(), true)
	if err != nil {
		return err
	}
	added := int64(0)
	if from == pb.TaskState_TASK_STATE_UNSPECIFIED {
		added = 1
	}
	after, err := tx.putTask(t, added == 1, added == 1 && !tx.b.c.keepsNew(m.Pending))
	if err != nil {
		return err
	}
	if err := tx.ready.add(t); err != nil { // a pending or delayed task; others are not ordered
		return err
	}
	tx.keyedEnter(t, from)
	if err := tx.countTenant(t.GetTenant(), added, after-before); err != nil {
		return err
	}
	m.Count(from, -1)
	m.Count(t.GetState(), +1)
	if tx.feature >= LevelCounters {
		if m.Totals == nil {
			m.Totals = &storage.QueueTotals{} // the record's first write since the latch
		}
		countTransition(m.Totals, from, t.GetState())
		// Marked per command, like the totals themselves, so the record's
		// version does not depend on how entries are batched.
		m.Totals.HasReleased = m.Totals.HasReleased || tx.feature >= LevelAttempts
	}
	if err := tx.countRunning(t, from, m); err != nil {
		return err
	}
	if t.GetState() == pb.TaskState_TASK_STATE_PENDING && t.GetSeq() < m.Head[t.GetPriority()] {
		// Keep the head hint a lower bound; this undoes storage.Drained.
		m.Head[t.GetPriority()] = t.GetSeq()
	}
	if err := tx.depsMoved(t, from); err != nil {
		return err
	}
	if t.GetState() == from {
		return nil
	}
	switch t.GetState() {
	case pb.TaskState_TASK_STATE_PENDING:
		tx.announcePending(t.GetQueue(), t.GetTenant())
	case pb.TaskState_TASK_STATE_COMPLETED, pb.TaskState_TASK_STATE_FAILED,
		pb.TaskState_TASK_STATE_CANCELLED, pb.TaskState_TASK_STATE_DEAD:
		tx.ev.Finished = append(tx.ev.Finished, t.GetId())
	}
	return nil
}

// announcePending names the queue in the batch's Event as one that gained
// claimable tasks; finish fills in its pending count.
func (tx *txn) announcePending(queue, tenant string) {
	k := QueueRef{Queue: queue, Tenant: tenant} // no key built: every enqueue asks
	if !tx.pendingEv[k] {
		if tx.pendingEv == nil { // only batches that enqueue need it
			tx.pendingEv = map[QueueRef]bool{}
		}
		tx.pendingEv[k] = true
		tx.ev.Pending = append(tx.ev.Pending, QueueCount{QueueRef: k})
	}
}

// nextSeq is a pending position behind every existing one: the log index in
// the high bits and the position within the entry in the low 16.
func (tx *txn) nextSeq(pos int) uint64 { return tx.index<<16 | uint64(tx.base+pos) }

// requeue puts a running task back after a failed attempt (nack or reap):
// attempts+1, then dead-letter at max attempts, delayed when delay > 0, or
// pending at the back of its priority. From LevelRetries on, a requeue
// without a delay of its own waits out the task's backoff (retryDelay),
// and a dead letter gets an expiry (deadExpiry). out is how the attempt ended; a
// nack's reason is its error, an expiry has none but its outcome.
func (tx *txn) requeue(t *pb.Task, pos int, delay int64, reason string, out pb.AttemptOutcome) error {
	attempts := t.GetAttempts() + 1
	mutate := func(t *pb.Task) {
		if out == pb.AttemptOutcome_ATTEMPT_OUTCOME_NACKED || out == pb.AttemptOutcome_ATTEMPT_OUTCOME_TIMED_OUT {
			tx.closeAttempt(t, out, reason)
		} else {
			tx.closeAttempt(t, out, "")
		}
		t.Attempts = attempts
		t.LastError = reason
		t.WorkerId = ""
	}
	if attempts >= t.GetMaxAttempts() {
		expire, err := tx.deadExpiry(t)
		if err != nil {
			return err
		}
		return tx.move(t, pb.TaskState_TASK_STATE_DEAD, func(t *pb.Task) {
			mutate(t)
			t.FinishedAt = tx.now
			t.ExpireAt = expire
		})
	}
	delay, err := tx.retryDelay(t, delay, attempts)
	if err != nil {
		return err
	}
	if planted("requeue-forgets-task") {
		delay = plantForgetDelay
	}
	switch {
	case delay > 0:
		return tx.move(t, pb.TaskState_TASK_STATE_DELAYED, func(t *pb.Task) {
			mutate(t)
			t.VisibleAt = addTime(tx.now, delay)
		})
	default:
		return tx.move(t, pb.TaskState_TASK_STATE_PENDING, func(t *pb.Task) {
			mutate(t)
			t.Seq = tx.nextSeq(pos)
			t.VisibleAt = tx.now
		})
	}
}

// finishTask moves a task to a terminal state kept until its retention ends.
func (tx *txn) finishTask(t *pb.Task, to pb.TaskState, mutate func(*pb.Task)) error {
	return tx.move(t, to, func(t *pb.Task) {
		if mutate != nil {
			mutate(t)
		}
		tx.cancelledOutcome(t, to)
		t.FinishedAt = tx.now
		t.ExpireAt = addTime(tx.now, t.GetRetentionNs())
	})
}

// item is one answer of a command. A fence is shown only to the worker
// holding the claim, so only an accepted answer (OK, or ALREADY_DONE for
// the Submit that won) carries the task's fence: there it is the caller's
// own, a stale one, or none. A refusal or a DUPLICATE may concern a task
// running under someone else's claim, and a careless worker retrying with
// a fence it was told would defeat fencing. A STALE_FENCE answer carries
// no state either: a stale writer learns only that it is stale.
func item(code pb.Code, id string, t *pb.Task, detail string) *pb.ItemResult {
	it := &pb.ItemResult{Code: code, TaskId: id, Detail: detail}
	if t == nil {
		return it
	}
	if code != pb.Code_CODE_STALE_FENCE {
		it.State = t.GetState()
	}
	if code == pb.Code_CODE_OK || code == pb.Code_CODE_ALREADY_DONE {
		it.Fence = t.GetFence()
	}
	return it
}

// countTransition counts one task's move in its queue's totals.
func countTransition(tt *storage.QueueTotals, from, to pb.TaskState) {
	if from == to {
		return
	}
	switch {
	case from == pb.TaskState_TASK_STATE_UNSPECIFIED:
		tt.Enqueued++
	case to == pb.TaskState_TASK_STATE_RUNNING:
		tt.Claimed++
	case to == pb.TaskState_TASK_STATE_COMPLETED:
		tt.Completed++
	case to == pb.TaskState_TASK_STATE_FAILED:
		tt.Failed++
	case to == pb.TaskState_TASK_STATE_CANCELLED:
		tt.Cancelled++
	case to == pb.TaskState_TASK_STATE_DEAD:
		tt.DeadLettered++
	case (from == pb.TaskState_TASK_STATE_RUNNING || from == pb.TaskState_TASK_STATE_DEAD) &&
		(to == pb.TaskState_TASK_STATE_PENDING || to == pb.TaskState_TASK_STATE_DELAYED):
		tt.Requeued++
	}
}

// total counts something in t's queue's totals that no state move says,
// once the cluster latched LevelCounters.
func (tx *txn) total(t *pb.Task, fn func(*storage.QueueTotals)) error {
	if tx.feature < LevelCounters {
		return nil
	}
	m, err := tx.meta(t.GetQueue(), t.GetTenant(), true)
	if err != nil {
		return err
	}
	if m.Totals == nil {
		m.Totals = &storage.QueueTotals{}
	}
	m.Totals.HasReleased = m.Totals.HasReleased || tx.feature >= LevelAttempts
	fn(m.Totals)
	return nil
}
