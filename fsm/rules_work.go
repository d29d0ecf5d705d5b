package fsm

import (
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// TaskID is the id minted for the task at position pos of the Enqueue entry
// at index: deterministic on every replica, and sortable by creation.
func TaskID(index uint64, pos int) string {
	if pos < 0 || pos > 0xffff {
		return fmt.Sprintf("%016x%04x", index, pos) // never: pos < pb.MaxBatch
	}
	// The same text as the Sprintf above, without its cost on every enqueue.
	const digits = "0123456789abcdef"
	var b [20]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[index&0xf]
		index >>= 4
	}
	for i, v := 19, pos; i >= 16; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
	return string(b[:])
}

// enqueue stores new tasks, pending or delayed. A task whose idempotency key
// is already known is answered with the original id and stores nothing.
func (tx *txn) enqueue(c *pb.EnqueueCmd, res *pb.CommandResult) error {
	// Dependencies count from LevelDependencies on; before it apply ignores
	// them, as a build that does not know the fields does.
	deps := tx.feature >= LevelDependencies && hasDeps(c)
	if deps {
		if refused, err := tx.checkDeps(c, res); err != nil || refused {
			return err
		}
	}
	ids := make([]string, len(c.GetTasks())) // per position: the id stored or found, "" if refused
	for pos, nt := range c.GetTasks() {
		q, tn := nt.GetQueue(), nt.GetTenant()
		key := nt.GetIdempotencyKey()
		var ik []byte
		if key != "" {
			ik = storage.IdemKey(q, tn, key)
			if t, ok, err := tx.idemTask(ik); err != nil {
				return err
			} else if ok && !planted("idempotency-lets-duplicate") {
				ids[pos] = t.GetId()
				res.Items = append(res.Items, item(pb.Code_CODE_DUPLICATE, t.GetId(), t, "idempotency key seen"))
				continue
			}
		}
		t := &pb.Task{
			Id:             TaskID(tx.index, tx.base+pos),
			Queue:          q,
			Tenant:         tn,
			Payload:        nt.GetPayload(),
			Priority:       nt.GetPriority(),
			MaxAttempts:    nt.GetMaxAttempts(),
			IdempotencyKey: key,
			RetentionNs:    nt.GetRetentionNs(),
			CreatedAt:      tx.now,
			VisibleAt:      addTime(tx.now, nt.GetDelayNs()),
			Seq:            tx.nextSeq(pos),
		}
		if nt.GetRetry().GetBaseNs() > 0 && tx.feature >= LevelRetries {
			t.Retry = nt.GetRetry() // an older build would not store it
		}
		if t.MaxAttempts == 0 {
			t.MaxAttempts = pb.DefaultMaxAttempts
		}
		if t.RetentionNs == 0 {
			t.RetentionNs = int64(pb.DefaultRetention)
		}
		if nt.GetRunAt() > 0 {
			t.VisibleAt = nt.GetRunAt()
		}
		if tx.feature >= LevelCancelRunning { // an older build drops them
			t.TimeoutNs, t.RetryOnTimeout = nt.GetTimeoutNs(), nt.GetRetryOnTimeout()
		}
		if tx.feature >= LevelFairQueues {
			t.Key = nt.GetKey()
		}
		t.State = pb.TaskState_TASK_STATE_PENDING
		if t.VisibleAt > tx.now {
			t.State = pb.TaskState_TASK_STATE_DELAYED
		}
		var unfinished []*pb.Task
		if deps && (len(nt.GetAfter()) > 0 || len(nt.GetAfterIndex()) > 0) {
			parents, refused := parentsOf(nt, ids)
			var refuse *pb.ItemResult
			var err error
			if refused >= 0 {
				refuse = refusedParent(res.GetItems(), refused)
			} else if unfinished, refuse, err = tx.waitOn(t, nt, parents); err != nil {
				return err
			}
			if refuse != nil {
				res.Items = append(res.Items, refuse)
				continue
			}
			if err := tx.inheritKey(t, parents); err != nil {
				return err
			}
		}
		if lim := c.GetLimits(); lim != nil {
			why, err := tx.overLimit(tn, lim, int(taskBytes(t)))
			if err != nil {
				return err
			}
			if why != "" {
				// Refused, not failed: nothing is stored, the idempotency
				// key stays free, and the same item may be sent again.
				res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_RESOURCE_EXHAUSTED, Detail: why})
				continue
			}
		}
		if err := tx.write(t, pb.TaskState_TASK_STATE_UNSPECIFIED, 0); err != nil {
			return err
		}
		if err := tx.register(t, unfinished); err != nil {
			return err
		}
		ids[pos] = t.Id
		if key != "" {
			if err := tx.setIdem(ik, t.Id); err != nil {
				return err
			}
		}
		if err := tx.debounce(t); err != nil {
			return err
		}
		res.Items = append(res.Items, item(pb.Code_CODE_OK, t.Id, t, ""))
	}
	return nil
}

// claim hands the head of the queue to one worker: highest priority first,
// FIFO within it. The fence is the claim entry's log index, so a task's
// fences strictly increase across claims and leaders.
//
// The catalog's head hints keep a claim's cost flat: each priority's scan
// starts at its hint, past the tombstones earlier claims left, and a
// priority whose hint is storage.Drained is skipped without a seek (a
// claim that empties a priority marks it; txn.write lowers the hint again
// when a task arrives). Creating an iterator per empty priority and per
// claim for the delayed range cost most of a claim (BenchmarkClaim_Backlog,
// BenchmarkApplyBatch_ClaimSubmit).
func (tx *txn) claim(c *pb.ClaimCmd, res *pb.CommandResult) error {
	q, tn := c.GetQueue(), c.GetTenant()
	cfg, want, err := tx.admitClaim(q, tn, int(c.GetMaxTasks()))
	if err != nil || want == 0 {
		return err // paused, or limited to nothing: an empty answer
	}
	m, err := tx.meta(q, tn, false)
	if err != nil {
		return err
	}
	// Due delayed tasks become visible at exactly their time, not when the
	// leader's mover next runs. The counter says when there are none.
	if m.Delayed > 0 {
		if err := tx.promote(tx.dueDelayed(q, tn, pb.MaxBatch)); err != nil {
			return err
		}
	}
	claimed := len(res.Tasks)
	if kq := tx.keyed.queue(q, tn); kq != nil {
		if err := tx.claimKeyed(kq, c, res, want); err != nil {
			return err
		}
		return tx.spendTokens(q, tn, cfg, len(res.Tasks)-claimed)
	}
	// The answer's byte budget is per claim, so each caller of a Batch has
	// its own; a claim that reaches it stops, and the rest stays pending.
	var bud budget
	full := false
	for p := int(MaxPriority); p >= 0 && want > 0 && !full && m.Pending > 0; p-- {
		if m.Head[p] == storage.Drained {
			continue
		}
		prio := uint32(p)
		heads := tx.pendingHeads(q, tn, prio, m.Head[p], want)
		drained := len(heads) < want
		pre, err := tx.prefetch(heads)
		if err != nil {
			return err
		}
		for i, h := range heads {
			t, ok, err := tx.fetchedTask(pre, i, h.id)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("pending index points at missing task %s", h.id)
			}
			size := taskBytes(t) // the answer's cost, and the move's size before
			if !bud.take(claimedBytes(size, c.GetWorkerId())) {
				full, drained = true, false // this task and the ones behind it stay
				break
			}
			if err := tx.claimOne(t, size, c); err != nil {
				return err
			}
			m.Head[p] = h.seq + 1 // the claimed key is gone; later ones are larger
			res.Tasks = append(res.Tasks, t)
			want--
		}
		if drained {
			// No pending key of this priority is left at or past the hint,
			// and none is below it. Mark the record written even when
			// nothing was claimed: the hint changed, and every change must
			// be written for the keyspace not to depend on batching.
			m.Head[p] = storage.Drained
			if _, err := tx.meta(q, tn, true); err != nil {
				return err
			}
		}
	}
	return tx.spendTokens(q, tn, cfg, len(res.Tasks)-claimed)
}

// claimOne moves a pending task of taskBytes size to running under c's
// claim. The record is written; the answer goes without the history: the
// worker needs none, and past fences are for admins only.
func (tx *txn) claimOne(t *pb.Task, size int64, c *pb.ClaimCmd) error {
	err := tx.moveSized(t, size, pb.TaskState_TASK_STATE_RUNNING, func(t *pb.Task) {
		t.Fence = tx.index
		t.WorkerId = c.GetWorkerId()
		t.LeaseNs = c.GetLeaseNs()
		t.LeaseUntil = addTime(tx.now, c.GetLeaseNs())
		t.ClaimedAt = tx.now
		t.Claims++
		tx.startDeadline(t)
		tx.openAttempt(t)
	})
	t.History = nil
	return err
}

// heartbeat extends each lease held under exactly its fence and stores the
// worker's progress. A lease never shrinks.
func (tx *txn) heartbeat(c *pb.HeartbeatCmd, res *pb.CommandResult) error {
	for _, hb := range c.GetItems() {
		t, code, err := tx.runningFor(hb.GetTaskId(), hb.GetFence(), hb.GetTenant())
		if err != nil {
			return err
		}
		if code != pb.Code_CODE_OK && tx.timedOutClaim(t, hb.GetFence()) {
			// The leader's TimeOut ended this very claim before the
			// heartbeat applied: tell its worker what a heartbeat a moment
			// earlier would have (TIMED_OUT), not that its lease was lost.
			res.Items = append(res.Items, item(pb.Code_CODE_TIMED_OUT, t.GetId(), t, detailTimedOut))
			continue
		}
		if code != pb.Code_CODE_OK {
			res.Items = append(res.Items, item(code, hb.GetTaskId(), t, staleDetail(t, hb.GetFence())))
			continue
		}
		if tx.pastDeadline(t) {
			// Refused, changing nothing: the worker stops, and the
			// leader's TimeOut ends the claim (rules_cancel.go).
			res.Items = append(res.Items, item(pb.Code_CODE_TIMED_OUT, t.GetId(), t, detailTimedOut))
			continue
		}
		lease := hb.GetLeaseNs()
		if lease == 0 {
			lease = t.GetLeaseNs()
		}
		renewed := t.GetLeaseUntil() - t.GetLeaseNs() // the last claim or heartbeat
		until := max(t.GetLeaseUntil(), addTime(tx.now, lease))
		err = tx.move(t, pb.TaskState_TASK_STATE_RUNNING, func(t *pb.Task) {
			t.LeaseNs = lease
			t.LeaseUntil = until
			if hb.GetHasProgress() {
				t.Progress = hb.GetProgress()
			}
			tx.renewAttempt(t)
		})
		if err != nil {
			return err
		}
		it := item(pb.Code_CODE_OK, t.GetId(), t, "")
		it.SinceNs = max(0, tx.now-renewed)
		it.CancelRequested = t.GetCancelRequested()
		res.Items = append(res.Items, it)
	}
	return nil
}

// submit is the compare-and-set terminal transition. The same Submit again
// after it won is answered ALREADY_DONE and changes nothing. A Submit under
// a claim that Cancel reached is answered CANCELLED (rules_cancel.go).
func (tx *txn) submit(c *pb.SubmitCmd, res *pb.CommandResult) error {
	t, code, err := tx.runningFor(c.GetTaskId(), c.GetFence(), c.GetTenant())
	if err != nil {
		return err
	}
	switch {
	case code == pb.Code_CODE_STALE_FENCE && tx.cancelledClaim(t, c.GetFence()):
		res.Items = append(res.Items, item(pb.Code_CODE_CANCELLED, t.GetId(), t, detailCancelled))
		return nil
	case code == pb.Code_CODE_STALE_FENCE && endedBySubmit(t, c.GetFence()):
		code = pb.Code_CODE_ALREADY_DONE
	}
	if code == pb.Code_CODE_STALE_FENCE && planted("submit-ignores-fence") && t != nil {
		code = pb.Code_CODE_OK
	}
	if code != pb.Code_CODE_OK {
		res.Items = append(res.Items, item(code, c.GetTaskId(), t, staleDetail(t, c.GetFence())))
		return nil
	}
	if tx.feature >= LevelCancelledOutcome && tx.cancelling(t) {
		return tx.submitCancelled(t, c, res)
	}
	to := pb.TaskState_TASK_STATE_COMPLETED
	if c.GetOutcome() == pb.Outcome_OUTCOME_FAILED {
		to = pb.TaskState_TASK_STATE_FAILED
	}
	claimed := t.GetClaimedAt()
	out := pb.AttemptOutcome_ATTEMPT_OUTCOME_COMPLETED
	if to == pb.TaskState_TASK_STATE_FAILED {
		out = pb.AttemptOutcome_ATTEMPT_OUTCOME_FAILED
	}
	// Below LevelCancelledOutcome a cancelled task keeps what its worker
	// submitted (rules_cancel.go).
	keep := func(t *pb.Task) { t.Outcome, t.Result = c.GetOutcome(), c.GetResult() }
	ended, err := tx.endIfCancelled(t, submittedWhy(c), keep)
	if err != nil {
		return err
	}
	if !ended {
		err = tx.finishTask(t, to, func(t *pb.Task) {
			tx.closeAttempt(t, out, c.GetError())
			t.Outcome = c.GetOutcome()
			t.Result = c.GetResult()
			t.LastError = c.GetError()
		})
	}
	if err != nil {
		return err
	}
	tx.answerHeld(res, t, claimed)
	return nil
}

// nack gives a task back: it counts an attempt, and the task returns after
// delay, or to the dead letters at max attempts.
func (tx *txn) nack(c *pb.NackCmd, res *pb.CommandResult) error {
	return tx.handBack(c.GetTaskId(), c.GetFence(), c.GetTenant(), "the worker nacked: "+c.GetReason(), res,
		func(t *pb.Task) error {
			return tx.requeue(t, 0, c.GetDelayNs(), c.GetReason(), pb.AttemptOutcome_ATTEMPT_OUTCOME_NACKED)
		})
}

// handBack is how a worker gives its running task back (Nack, Snooze). A
// claim past its execution deadline ends by the timeout's rule, and one
// that Cancel reached ends CANCELLED (rules_cancel.go), so that handing
// back dodges neither; otherwise back moves the task. The item answers
// how long the claim was held.
func (tx *txn) handBack(id string, fence uint64, tenant, why string, res *pb.CommandResult, back func(*pb.Task) error) error {
	t, code, err := tx.runningFor(id, fence, tenant)
	if err != nil {
		return err
	}
	if code != pb.Code_CODE_OK {
		res.Items = append(res.Items, item(code, id, t, staleDetail(t, fence)))
		return nil
	}
	claimed := t.GetClaimedAt()
	var ended bool
	if tx.pastDeadline(t) {
		ended, err = true, tx.endTimedOut(t, 0)
	} else {
		ended, err = tx.endIfCancelled(t, why, nil)
	}
	if err == nil && !ended {
		err = back(t)
	}
	if err != nil {
		return err
	}
	tx.answerHeld(res, t, claimed)
	return nil
}

// answerHeld answers an accepted Submit, Nack or Snooze with how long the
// claim was held, which the leader's lease metrics read.
func (tx *txn) answerHeld(res *pb.CommandResult, t *pb.Task, claimed int64) {
	it := item(pb.Code_CODE_OK, t.GetId(), t, "")
	it.SinceNs = max(0, tx.now-claimed)
	res.Items = append(res.Items, it)
}

// reap requeues tasks whose lease the leader saw expire. It re-checks fence
// and expiry at apply time: a heartbeat applied after the leader's scan
// wins, and the item is answered WRONG_STATE.
func (tx *txn) reap(c *pb.ReapCmd, res *pb.CommandResult) error {
	return tx.eachRunning(c.GetItems(), res, func(pos int, t *pb.Task) (pb.Code, string, error) {
		if t.GetLeaseUntil() > tx.now {
			return pb.Code_CODE_WRONG_STATE, "lease extended", nil
		}
		if tx.pastDeadline(t) {
			// Past its execution deadline too: the timeout's rule, as if
			// the leader's TimeOut had landed first (rules_cancel.go), so
			// the outcome does not depend on which loop proposed first.
			return pb.Code_CODE_OK, "", tx.endTimedOut(t, pos)
		}
		ended, err := tx.endIfCancelled(t, "lease expired", nil)
		if err == nil && !ended {
			err = tx.requeue(t, pos, 0, "lease expired", pb.AttemptOutcome_ATTEMPT_OUTCOME_EXPIRED)
		}
		if err == nil {
			err = tx.total(t, func(tt *storage.QueueTotals) { tt.Expired++ })
		}
		return pb.Code_CODE_OK, "", err
	})
}

// release puts back tasks whose claim answer never reached its caller: a
// task still running under exactly the fence of that claim returns to
// pending at its old seq (the head of its priority, where it was taken
// from), with no attempt counted and no worker. Any other task is answered
// as heartbeat would (STALE_FENCE, NOT_FOUND) and left alone, so a release
// that arrives after the lease was reaped, or after another claim, does
// nothing.
//
// It is safe because the fence is the claim's log index, which only the
// lost answer carried: no worker holds it, so no worker can be working on
// the task, and a late Submit or Heartbeat with it would be stale anyway.
func (tx *txn) release(c *pb.ReleaseCmd, res *pb.CommandResult) error {
	return tx.eachRunning(c.GetItems(), res, func(_ int, t *pb.Task) (pb.Code, string, error) {
		// A task cancelled while its claim's answer was lost never runs
		// again: it ends rather than go back (rules_cancel.go).
		ended, err := tx.endIfCancelled(t, "its claim's answer never reached the worker", nil)
		if err == nil && !ended {
			err = tx.move(t, pb.TaskState_TASK_STATE_PENDING, func(t *pb.Task) {
				tx.closeAttempt(t, pb.AttemptOutcome_ATTEMPT_OUTCOME_RELEASED, "")
				t.WorkerId = ""
			})
		}
		if err == nil && tx.feature >= LevelAttempts {
			err = tx.total(t, func(tt *storage.QueueTotals) { tt.Released++ })
		}
		return pb.Code_CODE_OK, "", err
	})
}

// eachRunning runs fn for each item whose task runs under exactly its
// fence, and answers every other item as stale (STALE_FENCE, NOT_FOUND)
// without calling fn: the leader's loops (Reap, Release, TimeOut) name
// claims they saw, and any of them may have ended since. fn answers its
// item with a code and a detail; pos is the item's place in the command.
func (tx *txn) eachRunning(items []*pb.ReapItem, res *pb.CommandResult, fn func(pos int, t *pb.Task) (pb.Code, string, error)) error {
	for pos, ri := range items {
		t, code, err := tx.running(ri.GetTaskId(), ri.GetFence())
		if err != nil {
			return err
		}
		if code != pb.Code_CODE_OK {
			res.Items = append(res.Items, item(code, ri.GetTaskId(), t, staleDetail(t, ri.GetFence())))
			continue
		}
		code, detail, err := fn(pos, t)
		if err != nil {
			return err
		}
		res.Items = append(res.Items, item(code, t.GetId(), t, detail))
	}
	return nil
}

// running loads a task and checks it runs under exactly fence. It returns
// the task (nil when missing) and OK, NOT_FOUND or STALE_FENCE.
func (tx *txn) running(id string, fence uint64) (*pb.Task, pb.Code, error) {
	return tx.runningFor(id, fence, "")
}

// runningFor is running for a caller of tenant: another tenant's task is
// NOT_FOUND, exactly as a missing one (rules_auth.go). The task comes
// without the payload of a split record (getHeaderOf): callers change it
// and answer with items, never with the task.
func (tx *txn) runningFor(id string, fence uint64, tenant string) (*pb.Task, pb.Code, error) {
	t, ok, err := tx.getHeaderOf(id, tenant)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, pb.Code_CODE_NOT_FOUND, nil
	}
	if t.GetState() != pb.TaskState_TASK_STATE_RUNNING || t.GetFence() != fence {
		return t, pb.Code_CODE_STALE_FENCE, nil
	}
	return t, pb.Code_CODE_OK, nil
}

// staleDetail explains a refusal to the caller without naming the task's
// current fence or state: a stale writer may learn only that it is stale,
// or a careless one could retry with the fence it was told and defeat
// fencing (see item).
func staleDetail(t *pb.Task, fence uint64) string {
	if t == nil {
		return "no such task"
	}
	return fmt.Sprintf("fence %d is not the task's current claim", fence)
}
