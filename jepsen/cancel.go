package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dockethq/docket/client"
)

// Cancel of running work and execution timeouts under faults.
//
// CancelQueue's worker claims a task and heartbeats once; an operator
// (the admin client) then cancels it while it runs; the worker sometimes
// heartbeats again, and submits. CheckCancel asks that once a Cancel was
// acknowledged, no Submit invoked after it was accepted, the task was
// never delivered again, a heartbeat of it was accepted only saying
// cancel_requested, and it reads CANCELLED at the end.
//
// TimeoutQueue's tasks have an execution timeout (TaskTimeoutAfter) and
// no retry on timeout. Their worker heartbeats past the deadline until it
// is told TIMED_OUT, reads the task until the leader ended the claim, and
// then submits under its fence all the same, as a worker that ignored the
// news would. CheckTimeouts asks that no heartbeat was accepted past a
// claim's deadline and that no Submit after the claim was seen ended was
// accepted.
const (
	TaskTimeoutAfter = 1500 * time.Millisecond
	MinCancelRunning = 3
	MinTimeouts      = 3
)

func (w *workload) cancels(mainCtx, ctx context.Context) {
	proc, admin := w.cfg.ProcPrefix+"cancel", w.cfg.ProcPrefix+"cancel-admin"
	x := newXState()
	for n := 0; n < 1_000_000 && !w.xstop(ctx, x); n++ {
		if x.xdue(mainCtx, time.Second) {
			w.xenqueue(mainCtx, proc, CancelQueue, fmt.Sprintf("%s-%d", proc, n))
		}
		t := w.xclaim(ctx, proc, CancelQueue, x)
		if t == nil {
			continue
		}
		w.xheartbeat(ctx, proc, CancelQueue, t)
		op := w.rec.Invoke(Event{Proc: admin, F: FCancel, Task: t.GetId(), Queue: CancelQueue})
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := w.acl.CancelTask(c, t.GetId())
		cancel()
		if err == nil {
			w.rec.Record(Event{Proc: admin, Op: op, Type: OK, F: FCancel, Task: t.GetId(), Queue: CancelQueue,
				Cancel: res.Requested, Key: res.State.String()})
		} else {
			typ, cls := classify(err)
			w.rec.Record(Event{Proc: admin, Op: op, Type: typ, F: FCancel, Task: t.GetId(), Queue: CancelQueue, Err: cls})
		}
		if rand.IntN(2) == 0 {
			w.xheartbeat(ctx, proc, CancelQueue, t)
		}
		w.xsubmit(ctx, proc, CancelQueue, t)
	}
}

// CheckCancel: after a Cancel of a task was acknowledged at C, no Submit
// of it invoked after C was accepted, no claim invoked after C delivered
// it, no heartbeat invoked after C was accepted unless the cancel was of
// the running claim and the answer said cancel_requested, and its final
// read is CANCELLED. At least MinCancelRunning cancels must have reached
// a running task (cancel_requested in the answer).
func CheckCancel(h *History) Result {
	r := newResult("cancel-running")
	byTask := map[string][]Op{}
	for _, o := range h.Ops {
		if o.Queue == CancelQueue && o.Task != "" {
			byTask[o.Task] = append(byTask[o.Task], o)
		}
	}
	final := h.xfinal(CancelQueue)
	running := 0
	for _, c := range h.xops(FCancel, CancelQueue, OK) {
		r.Checked++
		if c.Cancel {
			running++
		}
		for _, o := range byTask[c.Task] {
			if o.Invoke <= c.Complete || o.Type != OK {
				continue
			}
			switch {
			case o.F == FXSubmit:
				r.violate(c.Task, "Submit accepted after the cancel was acknowledged: %s after %s", h.desc(o), h.desc(c))
			case o.F == FXClaim:
				r.violate(c.Task, "cancelled task delivered again: %s after %s", h.desc(o), h.desc(c))
			case o.F == FXHeartbeat && (!c.Cancel || !o.Cancel):
				r.violate(c.Task, "heartbeat accepted after the cancel without cancel_requested: %s after %s", h.desc(o), h.desc(c))
			}
		}
		if rd, ok := final[c.Task]; ok && rd.Key != stateCancelled {
			r.violate(c.Task, "cancelled task %s reads %s at the end: %s", c.Task, rd.Key, h.desc(rd))
		}
	}
	r.Note = fmt.Sprintf("%d cancels acknowledged, %d of a running task", r.Checked, running)
	if running < MinCancelRunning {
		r.violate("", "only %d cancels of a running task acknowledged, below the minimum of %d: the run did not test them", running, MinCancelRunning)
	}
	return r
}

func (w *workload) timeouts(mainCtx, ctx context.Context) {
	proc := w.cfg.ProcPrefix + "timeout"
	x := newXState()
	lease := w.cfg.Lease
	for n := 0; n < 1_000_000 && !w.xstop(ctx, x); n++ {
		if x.xdue(mainCtx, 4*time.Second) {
			w.xenqueue(mainCtx, proc, TimeoutQueue, fmt.Sprintf("%s-%d", proc, n), client.TaskTimeout(TaskTimeoutAfter))
		}
		t := w.xclaim(ctx, proc, TimeoutQueue, x)
		if t == nil {
			continue
		}
		if t.GetDeadlineAt() == 0 {
			// Stored without its timeout by a leader that had not
			// latched timeouts (a rolling upgrade): nothing to test.
			w.xsubmit(ctx, proc, TimeoutQueue, t)
			continue
		}
		timedOut := false
		end := time.Now().Add(3*TaskTimeoutAfter + lease)
		for i := 0; i < 100 && time.Now().Before(end) && ctx.Err() == nil; i++ {
			time.Sleep(lease / 4)
			typ, cls := w.xheartbeat(ctx, proc, TimeoutQueue, t)
			if typ == Fail {
				timedOut = cls == ErrTimedOut
				break
			}
		}
		// The leader ends the claim within a pass of its timeout loop:
		// wait to see it ended, so that the Submit below comes after.
		for i := 0; timedOut && i < 20 && ctx.Err() == nil; i++ {
			if st := w.xread(ctx, proc, TimeoutQueue, t.GetId()); st != "" && st != stateRunning {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		w.xsubmit(ctx, proc, TimeoutQueue, t)
	}
}

// CheckTimeouts: no heartbeat of a TimeoutQueue claim acknowledged at C
// with a deadline was accepted when invoked after C plus its timeout (and
// the clock tolerance): the deadline is the claim's stamp plus the
// timeout, and the stamp came before C. Once a read saw the task FAILED (its claim
// ended by the timeout: the worker never submits before it hears
// TIMED_OUT), no Submit of it invoked later was accepted, and its final
// read is still FAILED. At least MinTimeouts tasks must have been told
// TIMED_OUT and then seen ended.
func CheckTimeouts(h *History) Result {
	r := newResult("execution-timeout")
	type tf struct {
		task  string
		fence uint64
	}
	claims := map[tf]Op{}
	for _, c := range h.xops(FXClaim, TimeoutQueue, OK) {
		if c.Task != "" {
			claims[tf{c.Task, c.Fence}] = c
		}
	}
	told := map[string]bool{}
	for _, o := range h.xops(FXHeartbeat, TimeoutQueue, "") {
		if o.Type == Fail && o.Err == ErrTimedOut {
			told[o.Task] = true
		}
		c, ok := claims[tf{o.Task, o.Fence}]
		if o.Type != OK || !ok || c.Delay <= 0 {
			continue
		}
		r.Checked++
		deadline := c.Complete + c.Delay
		if o.Invoke > deadline+clockTolerance(h, c.Invoke, o.Invoke) {
			r.violate(o.Task, "heartbeat accepted %.3fs past the claim's execution deadline: %s after %s", float64(o.Invoke-deadline)/1e9, h.desc(o), h.desc(c))
		}
	}
	ended := map[string]Op{}
	for _, o := range h.xops(FXRead, TimeoutQueue, OK) {
		if p, ok := ended[o.Task]; o.Key == stateFailed && (!ok || o.Complete < p.Complete) {
			ended[o.Task] = o
		}
	}
	for _, s := range h.xops(FXSubmit, TimeoutQueue, OK) {
		if e, ok := ended[s.Task]; ok && s.Invoke > e.Complete {
			r.violate(s.Task, "Submit accepted after its claim was seen ended by the timeout: %s after %s", h.desc(s), h.desc(e))
		}
	}
	final := h.xfinal(TimeoutQueue)
	enforced := 0
	for task, e := range ended {
		if rd, ok := final[task]; ok && rd.Key != stateFailed {
			r.violate(task, "task %s read FAILED by its timeout, then %s: %s after %s", task, rd.Key, h.desc(rd), h.desc(e))
		}
		if told[task] {
			enforced++
		}
	}
	r.Note = fmt.Sprintf("%d heartbeats checked, %d tasks told TIMED_OUT and seen ended", r.Checked, enforced)
	if enforced < MinTimeouts {
		r.violate("", "only %d tasks told TIMED_OUT and seen ended, below the minimum of %d: the run did not test timeouts", enforced, MinTimeouts)
	}
	return r
}

// classifyFeature maps the feature workload's own answers to their
// classes: both are definite refusals.
func classifyFeature(err error) (string, string, bool) {
	switch {
	case errors.Is(err, client.ErrCancelled):
		return Fail, ErrCancelled, true
	case errors.Is(err, client.ErrTimedOut):
		return Fail, ErrTimedOut, true
	}
	return "", "", false
}
