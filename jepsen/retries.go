package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dockethq/docket/client"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Retries and snooze under faults.
//
// RetryQueue's tasks allow RetryMax attempts and always fail: their
// worker nacks every claim, or now and then stalls past the lease so that
// the reaper ends the attempt; it never submits. CheckRetries asks that no
// task was delivered more than RetryMax times, and that one delivered
// RetryMax times ended dead.
//
// SnoozeQueue's worker snoozes each task once, for SnoozeDelay, then
// completes it when it comes round again. CheckSnooze asks that no
// snoozed task was delivered before its snooze ran out, and that every
// one was delivered again.
const (
	RetryMax    = 3
	SnoozeDelay = 2 * time.Second
	// Minimum counts below which the checkers call a run untested.
	MinDeadLettered = 3
	MinSnoozes      = 3
)

var (
	stateDead      = docketv1.TaskState_TASK_STATE_DEAD.String()
	stateCancelled = docketv1.TaskState_TASK_STATE_CANCELLED.String()
	stateFailed    = docketv1.TaskState_TASK_STATE_FAILED.String()
	stateRunning   = docketv1.TaskState_TASK_STATE_RUNNING.String()
)

func (w *workload) retries(mainCtx, ctx context.Context) {
	proc := w.cfg.ProcPrefix + "retry"
	x := newXState()
	for n := 0; n < 1_000_000 && !w.xstop(ctx, x); n++ {
		if x.xdue(mainCtx, 3*time.Second) {
			w.xenqueue(mainCtx, proc, RetryQueue, fmt.Sprintf("%s-%d", proc, n), client.TaskMaxAttempts(RetryMax))
		}
		t := w.xclaim(ctx, proc, RetryQueue, x)
		if t == nil {
			continue
		}
		if !w.draining.Load() && rand.IntN(10) == 0 {
			time.Sleep(2 * w.cfg.Lease) // the reaper ends this attempt
			continue
		}
		op := w.rec.Invoke(Event{Proc: proc, F: FXNack, Task: t.GetId(), Fence: t.GetFence(), Queue: RetryQueue})
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := w.wcl.Nack(c, &docketv1.NackRequest{TaskId: t.GetId(), Tenant: Tenant, Fence: t.GetFence(),
			DelayNs: int64(100 * time.Millisecond), Reason: "jepsen retry"})
		cancel()
		w.xanswer(proc, op, FXNack, RetryQueue, t, err, false)
	}
}

// CheckRetries: a task of RetryQueue (max attempts RetryMax) was delivered
// at most RetryMax times, and one delivered RetryMax times reads DEAD at
// the end: nothing submits on that queue, so each claim ends by a Nack or
// its lease, an attempt each (the drain outlasts the last lease). At
// least MinDeadLettered tasks must have been seen dead so.
func CheckRetries(h *History) Result {
	r := newResult("retries")
	claims := map[string][]Op{}
	for _, c := range h.xops(FXClaim, RetryQueue, OK) {
		if c.Task != "" {
			claims[c.Task] = append(claims[c.Task], c)
		}
	}
	for task, cs := range claims {
		r.Checked++
		if len(cs) > RetryMax {
			r.violate(task, "task %s delivered %d times with max attempts %d: the last %s", task, len(cs), RetryMax, h.desc(cs[len(cs)-1]))
		}
	}
	final := h.xfinal(RetryQueue)
	dead, unread := 0, 0
	for task, cs := range claims {
		if len(cs) < RetryMax {
			continue
		}
		rd, ok := final[task]
		switch {
		case !ok:
			unread++
		case rd.Key != stateDead:
			r.violate(task, "task %s delivered %d times (max attempts %d) but reads %s, not dead: %s", task, len(cs), RetryMax, rd.Key, h.desc(rd))
		default:
			dead++
		}
	}
	r.Note = fmt.Sprintf("%d tasks, %d delivered %d times and dead, %d of those not read", len(claims), dead, RetryMax, unread)
	if dead < MinDeadLettered {
		r.violate("", "only %d tasks seen dead after %d deliveries, below the minimum of %d: the run did not test retries", dead, RetryMax, MinDeadLettered)
	}
	return r
}

func (w *workload) snoozes(mainCtx, ctx context.Context) {
	proc := w.cfg.ProcPrefix + "snooze"
	x := newXState()
	snoozed := map[string]bool{}
	for n := 0; n < 1_000_000 && !w.xstop(ctx, x); n++ {
		if x.xdue(mainCtx, time.Second) {
			w.xenqueue(mainCtx, proc, SnoozeQueue, fmt.Sprintf("%s-%d", proc, n))
		}
		t := w.xclaim(ctx, proc, SnoozeQueue, x)
		if t == nil {
			continue
		}
		if snoozed[t.GetId()] {
			w.xsubmit(ctx, proc, SnoozeQueue, t)
			continue
		}
		snoozed[t.GetId()] = true
		op := w.rec.Invoke(Event{Proc: proc, F: FSnooze, Task: t.GetId(), Fence: t.GetFence(), Queue: SnoozeQueue, Delay: int64(SnoozeDelay)})
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := w.wcl.Snooze(c, t.GetId(), t.GetFence(), SnoozeDelay)
		cancel()
		w.xanswer(proc, op, FSnooze, SnoozeQueue, t, err, false)
	}
}

// CheckSnooze: a task snoozed for D by a Snooze invoked at S (and
// acknowledged) is not delivered by a claim that completed before S+D,
// less the clock tolerance: the leader stamped the Snooze after S, and
// the task stays delayed until that stamp plus D. Every snoozed task is
// delivered again by the end of the drain. At least MinSnoozes must have
// been checked so.
func CheckSnooze(h *History) Result {
	r := newResult("snooze")
	claims := map[string][]Op{}
	for _, c := range h.xops(FXClaim, SnoozeQueue, OK) {
		if c.Task != "" {
			claims[c.Task] = append(claims[c.Task], c)
		}
	}
	worst := int64(-1 << 62)
	for _, s := range h.xops(FSnooze, SnoozeQueue, OK) {
		due := s.Invoke + s.Delay
		again := false
		for _, c := range claims[s.Task] {
			if c.Fence <= s.Fence {
				continue
			}
			again = true
			worst = max(worst, due-c.Complete)
			if tol := clockTolerance(h, s.Invoke, c.Complete); c.Complete < due-tol {
				r.violate(s.Task, "task %s delivered %.3fs before its snooze ran out: %s after %s (delay %s)", s.Task,
					float64(due-c.Complete)/1e9, h.desc(c), h.desc(s), time.Duration(s.Delay))
			}
		}
		switch {
		case again:
			r.Checked++
		case h.DrainNote == "":
			r.violate(s.Task, "snoozed task %s never delivered again: %s", s.Task, h.desc(s))
		}
	}
	if r.Checked > 0 {
		r.Note = fmt.Sprintf("%d snoozed tasks delivered again; the closest came %.3fs after its snooze's end, in the harness's time", r.Checked, float64(-worst)/1e9)
	}
	atLeast(&r, MinSnoozes, "snoozed tasks delivered again")
	return r
}
