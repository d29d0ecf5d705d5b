package fsm

import (
	"fmt"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Cancelling running work and the execution timeout (LevelCancelRunning).
// Every rule here acts only once the cluster latched the level: before it,
// Cancel of a running task is WRONG_STATE and no claim has a deadline, so
// apply writes exactly what a level-7 build writes.

// Details of the answers, for people.
const (
	detailCancelRequested = "cancel requested: the worker is told at its next heartbeat"
	detailCancelPending   = "cancel already requested"
	detailTimedOut        = "execution deadline passed"
	detailCancelled       = "the task was cancelled while this claim ran: nothing of the submit was kept"
)

// requestCancel marks a running task cancel-requested, on the task and on
// its open attempt. The worker keeps its claim: it learns of the request
// at its next heartbeat, and however the claim ends it ends CANCELLED
// (endIfCancelled). A second request changes nothing: ALREADY_DONE.
func (tx *txn) requestCancel(t *pb.Task, res *pb.CommandResult) error {
	if t.GetCancelRequested() {
		it := item(pb.Code_CODE_ALREADY_DONE, t.GetId(), t, detailCancelPending)
		it.Fence, it.CancelRequested = 0, true // the fence is the worker's alone
		res.Items = append(res.Items, it)
		return nil
	}
	err := tx.move(t, pb.TaskState_TASK_STATE_RUNNING, func(t *pb.Task) {
		t.CancelRequested = true
		t.CancelRequestedAt = tx.now
		if a := current(t); a != nil && tx.feature >= LevelAttempts {
			a.CancelRequestedAt = tx.now
		}
	})
	if err != nil {
		return err
	}
	it := item(pb.Code_CODE_OK, t.GetId(), t, detailCancelRequested)
	it.Fence, it.CancelRequested = 0, true
	res.Items = append(res.Items, it)
	return nil
}

// cancelling reports whether t's claim must end CANCELLED: Cancel reached
// it while it ran. The flag is only ever set once the level is latched,
// and the latch never falls, so reading it needs no other gate; the level
// check says so to the reader.
func (tx *txn) cancelling(t *pb.Task) bool {
	return tx.feature >= LevelCancelRunning && t.GetCancelRequested()
}

// endIfCancelled ends a running, cancel-requested task CANCELLED, whatever
// attempts remain, and reports whether it did. how says how its claim
// ended: cancelledWhy(how) is the attempt's error and the task's last
// error, built only for a task that is cancelled (every submit passes
// here). mutate, when set, runs too (a Submit keeps its result). No
// attempt is counted: the task will not run again.
func (tx *txn) endIfCancelled(t *pb.Task, how string, mutate func(*pb.Task)) (bool, error) {
	if !tx.cancelling(t) {
		return false, nil
	}
	why := cancelledWhy(how)
	err := tx.finishTask(t, pb.TaskState_TASK_STATE_CANCELLED, func(t *pb.Task) {
		tx.closeAttempt(t, pb.AttemptOutcome_ATTEMPT_OUTCOME_CANCELLED, why)
		if mutate != nil {
			mutate(t)
		}
		// why carries the worker's reason, which Validate let through at
		// up to MaxErrorLen: with the prefix it must not grow past it.
		t.LastError = cutUTF8(why, MaxErrorLen)
		t.WorkerId = ""
	})
	return err == nil, err
}

// cancelledWhy is the last error of a task cancelled while it ran, with
// how its claim ended.
func cancelledWhy(how string) string { return "cancelled while running; " + how }

// startDeadline sets the execution deadline of a claim being made, once
// the level is latched: claimed_at + timeout_ns. Called by claim inside
// its move, before the attempt opens, so the attempt records it too.
func (tx *txn) startDeadline(t *pb.Task) {
	if tx.feature < LevelCancelRunning || t.GetTimeoutNs() <= 0 {
		return
	}
	t.DeadlineAt = addTime(tx.now, t.GetTimeoutNs())
}

// pastDeadline reports whether t's current claim ran past its execution
// deadline at the txn's time.
func (tx *txn) pastDeadline(t *pb.Task) bool {
	return tx.feature >= LevelCancelRunning && t.GetDeadlineAt() > 0 && tx.now >= t.GetDeadlineAt()
}

// timedOutWhy is the error of a claim that ran past its deadline.
func timedOutWhy(t *pb.Task) string {
	return fmt.Sprintf("execution timeout: ran longer than %v", time.Duration(t.GetTimeoutNs()))
}

// timeOut ends claims the leader saw run past their execution deadline.
// It re-checks fence and deadline at apply time (a Submit applied after
// the leader's scan wins: STALE_FENCE). A claim past its deadline ends
// FAILED with the attempt TIMED_OUT; with retry_on_timeout it is
// requeued as a reap would (an attempt counted, DEAD at max_attempts);
// a cancel-requested one ends CANCELLED.
func (tx *txn) timeOut(c *pb.TimeOutCmd, res *pb.CommandResult) error {
	return tx.eachRunning(c.GetItems(), res, func(pos int, t *pb.Task) (pb.Code, string, error) {
		if !tx.pastDeadline(t) {
			return pb.Code_CODE_WRONG_STATE, "execution deadline not reached", nil
		}
		return pb.Code_CODE_OK, "", tx.endTimedOut(t, pos)
	})
}

// endTimedOut ends a claim past its deadline by the task's policy:
// CANCELLED when a cancel was requested, requeued (as a reap) with
// retry_on_timeout, else FAILED. pos is the task's place in the command,
// for its pending seq.
func (tx *txn) endTimedOut(t *pb.Task, pos int) error {
	why := timedOutWhy(t)
	ended, err := tx.endIfCancelled(t, why, nil)
	switch {
	case err != nil || ended:
		return err
	case t.GetRetryOnTimeout():
		return tx.requeue(t, pos, 0, why, pb.AttemptOutcome_ATTEMPT_OUTCOME_TIMED_OUT)
	}
	return tx.finishTask(t, pb.TaskState_TASK_STATE_FAILED, func(t *pb.Task) {
		tx.closeAttempt(t, pb.AttemptOutcome_ATTEMPT_OUTCOME_TIMED_OUT, why)
		// outcome stays unset: no Submit ended this claim, and a late one
		// must hear STALE_FENCE (endedBySubmit).
		t.LastError = why
		t.WorkerId = ""
	})
}

// PastDeadlines lists the running claims whose execution deadline passed
// by now, with their fences, for the leader's TimeOut; at most limit.
func (f *FSM) PastDeadlines(now int64, limit int) ([]*pb.ReapItem, error) {
	var entries []storage.TimeEntry
	r, release, err := f.orderView(func(o *readyOrder) bool { entries = o.pastDeadlines(now, limit); return len(entries) > 0 })
	if err != nil {
		return nil, err
	}
	defer release()
	items := make([]*pb.ReapItem, 0, len(entries))
	for _, e := range entries {
		t, err := storage.GetTask(r, e.ID)
		if err != nil {
			return nil, fmt.Errorf("past deadline %s: %w", e.ID, err)
		}
		items = append(items, &pb.ReapItem{TaskId: e.ID, Fence: t.GetFence()})
	}
	return items, nil
}

// newTaskLevel is the level an enqueued task's fields need: a timeout is
// LevelCancelRunning's, so the leader proposes it only once every server
// applies it (an older one would drop the field and diverge).
func newTaskLevel(nt *pb.NewTask) uint32 {
	if len(nt.GetKey()) > 0 {
		return LevelFairQueues
	}
	if nt.GetTimeoutNs() != 0 || nt.GetRetryOnTimeout() {
		return LevelCancelRunning
	}
	return LevelBase
}

// submittedWhy says how a cancel-requested claim's Submit ended it.
func submittedWhy(c *pb.SubmitCmd) string {
	if c.GetOutcome() == pb.Outcome_OUTCOME_FAILED {
		return "the worker submitted failed: " + c.GetError()
	}
	return "the worker submitted completed"
}

// timedOutClaim reports whether t's claim under fence is over and ran past
// its execution deadline: the task is no longer running under it (no
// later claim took it, no Submit or Cancel ended it), so TimeOut (or a
// reap past the deadline) ended it. A heartbeat of that claim is answered
// TIMED_OUT, whichever of the two applied first.
func (tx *txn) timedOutClaim(t *pb.Task, fence uint64) bool {
	if t == nil || t.GetFence() != fence || !tx.pastDeadline(t) || endedBySubmit(t, fence) {
		return false
	}
	switch t.GetState() {
	case pb.TaskState_TASK_STATE_FAILED, pb.TaskState_TASK_STATE_PENDING, pb.TaskState_TASK_STATE_DEAD:
		return true
	}
	return false
}

// endedBySubmit reports whether t's claim under fence ended with a Submit,
// so that the same Submit again is ALREADY_DONE rather than STALE_FENCE.
// Only a Submit sets the outcome COMPLETED or FAILED (Validate requires
// one of them); a claim ended by its deadline, or cancelled by a Nack or
// an expiry, has none, or CANCELLED from LevelCancelledOutcome on. Before
// LevelCancelRunning every COMPLETED or FAILED task was a Submit's.
func endedBySubmit(t *pb.Task, fence uint64) bool {
	switch t.GetState() {
	case pb.TaskState_TASK_STATE_COMPLETED, pb.TaskState_TASK_STATE_FAILED, pb.TaskState_TASK_STATE_CANCELLED:
		o := t.GetOutcome()
		return t.GetFence() == fence && (o == pb.Outcome_OUTCOME_COMPLETED || o == pb.Outcome_OUTCOME_FAILED)
	}
	return false
}

// cancelledClaim reports whether fence is the claim of t that Cancel
// reached, now ended: however it ended (this Submit, an earlier one, a
// Nack, its lease or deadline), a Submit under it is answered CANCELLED
// from LevelCancelledOutcome on. Cancel marks only a running task, and a
// marked task never runs again, so its fence is that claim's.
func (tx *txn) cancelledClaim(t *pb.Task, fence uint64) bool {
	return tx.feature >= LevelCancelledOutcome && t != nil && t.GetState() == pb.TaskState_TASK_STATE_CANCELLED &&
		t.GetCancelRequested() && t.GetFence() == fence
}

// submitCancelled ends a cancel-requested claim on its worker's Submit,
// from LevelCancelledOutcome on: CANCELLED, keeping neither the outcome
// nor the result it submitted (finishTask sets outcome CANCELLED), and
// tells the worker so. Below the level the Submit's outcome and result
// are kept and the answer is OK (submit).
func (tx *txn) submitCancelled(t *pb.Task, c *pb.SubmitCmd, res *pb.CommandResult) error {
	claimed := t.GetClaimedAt()
	if _, err := tx.endIfCancelled(t, submittedWhy(c), nil); err != nil {
		return err
	}
	it := item(pb.Code_CODE_CANCELLED, t.GetId(), t, detailCancelled)
	it.SinceNs = max(0, tx.now-claimed)
	res.Items = append(res.Items, it)
	return nil
}

// cancelledOutcome gives a task that ends CANCELLED its outcome, from
// LevelCancelledOutcome on: a WaitResult reader then sees CANCELLED, not
// the outcome a worker submitted (which older builds kept) or none.
// to is the state t ends in (move sets it after its mutate runs).
func (tx *txn) cancelledOutcome(t *pb.Task, to pb.TaskState) {
	if tx.feature >= LevelCancelledOutcome && to == pb.TaskState_TASK_STATE_CANCELLED {
		t.Outcome = pb.Outcome_OUTCOME_CANCELLED
	}
}
