package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dockethq/docket/client"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// The feature workload: a queue limit, retries to the dead letters,
// snooze, cancel of running work and execution timeouts, each on a queue
// of its own, so that the main queue's checkers see none of it, and each
// with a checker over the history (limits.go, retries.go, cancel.go). Its
// ops carry the queue (Event.Queue) and names of their own, so the task
// model and the lost, completed and fence checkers of the main queue do
// not read them.
const (
	FXEnqueue   = "x-enqueue"
	FXClaim     = "x-claim"
	FXHeartbeat = "x-heartbeat"
	FXSubmit    = "x-submit"
	FXNack      = "x-nack"
	// FXRead is a linearizable read of a feature task: Key is its state.
	FXRead    = "x-read"
	FSnooze   = "snooze"
	FCancel   = "cancel"
	FLimitSet = "limit-set"
)

// The feature queues.
const (
	LimitQueue   = "jepsen-limits"
	RetryQueue   = "jepsen-retry"
	SnoozeQueue  = "jepsen-snooze"
	CancelQueue  = "jepsen-cancel"
	TimeoutQueue = "jepsen-timeout"
)

// Error classes of the feature workload (Event.Err): a Submit answered
// "cancelled", a Heartbeat answered TIMED_OUT.
const (
	ErrCancelled = "cancelled"
	ErrTimedOut  = "timed_out"
)

// Time-based checkers compare the harness's clock with the leader's
// stamps. Every node runs on this machine's clock, so outside a
// clock-offset fault they differ by ClockSlack at most (a stamp's trip
// through the log); during such a fault, and for MaxClockOffset after it
// (the log's time never runs backwards, so a leader that ran ahead keeps
// the log ahead until real time catches up), by up to two offsets.
const (
	ClockSlack     = 500 * time.Millisecond
	MaxClockOffset = 8 * time.Second // the nemesis's largest offset (FaultClock)
)

// clockTolerance is the margin between the harness's clock and the log's
// over [from, to].
func clockTolerance(h *History, from, to int64) int64 {
	for _, f := range h.Faults {
		if f.Name == FaultClock && f.Start < to && f.End > from-int64(MaxClockOffset) {
			return int64(2*MaxClockOffset + ClockSlack)
		}
	}
	return int64(ClockSlack)
}

// xops returns the ops named f of queue, of completion type typ ("" any).
func (h *History) xops(f, queue, typ string) []Op {
	var out []Op
	for _, o := range h.Ops {
		if o.F == f && o.Queue == queue && (typ == "" || o.Type == typ) {
			out = append(out, o)
		}
	}
	return out
}

// xfinal returns each task's last acknowledged linearizable read of queue.
func (h *History) xfinal(queue string) map[string]Op {
	out := map[string]Op{}
	for _, o := range h.xops(FXRead, queue, OK) {
		if p, ok := out[o.Task]; !ok || o.Complete > p.Complete {
			out[o.Task] = o
		}
	}
	return out
}

// features runs the feature loops, each until the drain finds its queue
// quiet; the producers' parts stop with mainCtx.
func (w *workload) features(mainCtx, ctx context.Context) {
	var wg sync.WaitGroup
	for _, run := range []func(context.Context, context.Context){w.limits, w.retries, w.snoozes, w.cancels, w.timeouts, w.fair} {
		wg.Add(1)
		go func() { defer wg.Done(); run(mainCtx, ctx) }()
	}
	wg.Wait()
}

// xstate is one feature loop's pacing and drain bookkeeping.
type xstate struct {
	start    time.Time
	last     time.Time // when it last claimed a task
	drainEnd time.Time
	enqueued time.Time // when it last enqueued
}

func newXState() *xstate { return &xstate{start: time.Now(), last: time.Now()} }

// xstop reports whether a feature loop is done: ctx ended, or the drain
// found its queue quiet for DrainQuiet, or ran out.
func (w *workload) xstop(ctx context.Context, x *xstate) bool {
	if ctx.Err() != nil {
		return true
	}
	if !w.draining.Load() {
		return false
	}
	if x.drainEnd.IsZero() {
		x.drainEnd = time.Now().Add(w.cfg.DrainTimeout)
	}
	return time.Now().After(x.drainEnd) || time.Since(x.last) > w.cfg.DrainQuiet
}

// xdue reports whether a loop should enqueue now: while mainCtx lasts, at
// most one task every interval, chosen above the time a task takes to
// work off (so that no backlog builds up for the drain) and so that a
// feature queue holds a few thousand tasks in a long run at most. In the
// first minute the interval is halved, so that a short run (the smoke's,
// the planted run's 30 s) reaches the checkers' minimum counts; the
// backlog that builds is a few tasks.
func (x *xstate) xdue(mainCtx context.Context, interval time.Duration) bool {
	if time.Since(x.start) < time.Minute {
		interval /= 2
	}
	if mainCtx.Err() != nil || time.Since(x.enqueued) < interval {
		return false
	}
	x.enqueued = time.Now()
	return true
}

// xenqueue enqueues one task of queue under key (a retry of an unknown
// outcome reuses the key), with max attempts 1000 unless opts say
// otherwise, and returns its id, or "" when it was not acknowledged. A
// cluster that has not latched a feature's level refuses the task
// (ErrFeatureDisabled) before proposing it: a definite failure.
func (w *workload) xenqueue(ctx context.Context, proc, queue, key string, opts ...client.TaskOption) string {
	opts = append([]client.TaskOption{client.TaskIdempotencyKey(key), client.TaskMaxAttempts(1000), client.TaskTenant(Tenant)}, opts...)
	for attempt := 0; attempt < 4 && ctx.Err() == nil; attempt++ {
		op := w.rec.Invoke(Event{Proc: proc, F: FXEnqueue, Key: key, Queue: queue})
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		id, err := w.cl.EnqueueOne(c, queue, []byte(key), opts...)
		cancel()
		if err == nil {
			w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FXEnqueue, Key: key, Task: id, Queue: queue})
			w.knownMu.Lock()
			w.xknown[queue] = append(w.xknown[queue], id)
			w.knownMu.Unlock()
			return id
		}
		typ, cls := classify(err)
		if errors.Is(err, client.ErrFeatureDisabled) {
			typ = Fail
		}
		w.rec.Record(Event{Proc: proc, Op: op, Type: typ, F: FXEnqueue, Key: key, Err: cls, Queue: queue})
		if typ == Fail {
			return ""
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ""
}

// xclaim claims at most one task of queue, waiting up to a second, and
// returns it (nil for none or an error).
func (w *workload) xclaim(ctx context.Context, proc, queue string, x *xstate) *docketv1.Task {
	lease := w.cfg.Lease
	op := w.rec.Invoke(Event{Proc: proc, F: FXClaim, Lease: int64(lease), Queue: queue})
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	tasks, err := w.wcl.Claim(c, &docketv1.ClaimRequest{Queue: queue, Tenant: Tenant, WorkerId: proc,
		LeaseNs: int64(lease), MaxTasks: 1, WaitNs: int64(time.Second)})
	cancel()
	if err != nil {
		typ, cls := classify(err)
		w.rec.Record(Event{Proc: proc, Op: op, Type: typ, F: FXClaim, Err: cls, Queue: queue})
		time.Sleep(100 * time.Millisecond)
		return nil
	}
	return w.xclaimed(proc, op, queue, tasks, x)
}

// xclaimed records the acknowledged claim op of queue and returns its
// task, or nil when it took none.
func (w *workload) xclaimed(proc string, op int64, queue string, tasks []*docketv1.Task, x *xstate) *docketv1.Task {
	if len(tasks) == 0 {
		w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FXClaim, Queue: queue})
		return nil
	}
	t := tasks[0]
	// Delay is the claim's execution timeout when the claim has a deadline:
	// a cluster that had not latched timeouts (an older leader during a
	// rolling upgrade) may have stored the task without one.
	var timeout int64
	if t.GetDeadlineAt() > 0 {
		timeout = t.GetTimeoutNs()
	}
	w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FXClaim, Task: t.GetId(), Key: string(t.GetPayload()), Fence: t.GetFence(),
		Queue: queue, Delay: timeout, Claims: t.GetClaims()})
	x.last = time.Now()
	return t
}

// xheartbeat extends t's lease once and returns the answer's type and
// error class; an acknowledged one records whether it said the task was
// cancelled while it ran.
func (w *workload) xheartbeat(ctx context.Context, proc, queue string, t *docketv1.Task) (string, string) {
	lease := w.cfg.Lease
	op := w.rec.Invoke(Event{Proc: proc, F: FXHeartbeat, Task: t.GetId(), Fence: t.GetFence(), Lease: int64(lease), Queue: queue})
	c, cancel := context.WithTimeout(ctx, lease/2)
	items, err := w.wcl.Heartbeat(c, &docketv1.HeartbeatItem{TaskId: t.GetId(), Tenant: Tenant, Fence: t.GetFence(), LeaseNs: int64(lease)})
	cancel()
	if err == nil {
		err = client.ItemError(items[0])
	}
	if err == nil {
		w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FXHeartbeat, Task: t.GetId(), Fence: t.GetFence(), Queue: queue,
			Cancel: items[0].GetCancelRequested()})
		return OK, ""
	}
	typ, cls := classify(err)
	w.rec.Record(Event{Proc: proc, Op: op, Type: typ, F: FXHeartbeat, Task: t.GetId(), Fence: t.GetFence(), Queue: queue, Err: cls})
	return typ, cls
}

// xsubmit completes t under its fence and returns the answer's type.
func (w *workload) xsubmit(ctx context.Context, proc, queue string, t *docketv1.Task) string {
	op := w.rec.Invoke(Event{Proc: proc, F: FXSubmit, Task: t.GetId(), Fence: t.GetFence(), Queue: queue})
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	done, err := w.wcl.Submit(c, xsubmitReq(proc, t))
	cancel()
	return w.xanswer(proc, op, FXSubmit, queue, t, err, done)
}

// xsubmitReq completes t under its fence, with proc as the result.
func xsubmitReq(proc string, t *docketv1.Task) *docketv1.SubmitRequest {
	return &docketv1.SubmitRequest{TaskId: t.GetId(), Tenant: Tenant, Fence: t.GetFence(),
		Outcome: docketv1.Outcome_OUTCOME_COMPLETED, Result: []byte(proc)}
}

// xsubmitNext completes t under its fence and, with the run's ride
// probability, claims the worker's next task of queue in the same call
// and Raft entry (SubmitAndClaim): two ops, invoked together, the Submit
// first, and answered together. It returns the Submit's answer type and
// the task the ride claimed, or nil. A failed call is info for both,
// since the Submit may have applied while the claim was refused. A queue
// at a running limit is where a ride's claim meets the slot its own
// Submit frees, which is what the limits' checkers then judge.
func (w *workload) xsubmitNext(ctx context.Context, proc, queue string, t *docketv1.Task, x *xstate) (string, *docketv1.Task) {
	if rand.Float64() >= w.cfg.RideProb {
		return w.xsubmit(ctx, proc, queue, t), nil
	}
	lease := w.cfg.Lease
	sop := w.rec.Invoke(Event{Proc: proc, F: FXSubmit, Task: t.GetId(), Fence: t.GetFence(), Queue: queue})
	cop := w.rec.Invoke(Event{Proc: proc, F: FXClaim, Lease: int64(lease), Queue: queue})
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	items, tasks, err := w.wcl.SubmitAndClaim(c, &docketv1.ClaimRequest{Queue: queue, Tenant: Tenant, WorkerId: proc,
		LeaseNs: int64(lease), MaxTasks: 1}, xsubmitReq(proc, t))
	cancel()
	if err != nil {
		_, cls := classify(err)
		w.rec.Record(Event{Proc: proc, Op: sop, Type: Info, F: FXSubmit, Task: t.GetId(), Fence: t.GetFence(), Queue: queue, Err: cls})
		w.rec.Record(Event{Proc: proc, Op: cop, Type: Info, F: FXClaim, Queue: queue, Err: cls})
		return Info, nil
	}
	typ := w.xanswer(proc, sop, FXSubmit, queue, t, client.ItemError(items[0]), items[0].GetCode() == docketv1.Code_CODE_ALREADY_DONE)
	return typ, w.xclaimed(proc, cop, queue, tasks, x)
}

// xanswer records the completion of op on t and returns its type.
func (w *workload) xanswer(proc string, op int64, f, queue string, t *docketv1.Task, err error, done bool) string {
	if err == nil {
		w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: f, Task: t.GetId(), Fence: t.GetFence(), Queue: queue, Done: done})
		return OK
	}
	typ, cls := classify(err)
	w.rec.Record(Event{Proc: proc, Op: op, Type: typ, F: f, Task: t.GetId(), Fence: t.GetFence(), Queue: queue, Err: cls})
	return typ
}

// xread reads task linearizably and records its state; "" on an error.
func (w *workload) xread(ctx context.Context, proc, queue, task string) string {
	op := w.rec.Invoke(Event{Proc: proc, F: FXRead, Task: task, Queue: queue})
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	t, err := w.cl.ReadTask(c, task)
	cancel()
	if err != nil {
		typ, cls := classify(err)
		w.rec.Record(Event{Proc: proc, Op: op, Type: typ, F: FXRead, Task: task, Queue: queue, Err: cls})
		return ""
	}
	st := t.GetState().String()
	w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FXRead, Task: task, Queue: queue, Key: st})
	return st
}

// maxXReads bounds the final reads of each feature queue.
const maxXReads = 3000

// xreadAll reads the tasks of the queues whose checkers ask for a final
// state (retries, cancel, timeouts), four at a time.
func (w *workload) xreadAll(ctx context.Context) {
	type job struct{ queue, task string }
	jobs := make(chan job)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				w.xread(ctx, fmt.Sprintf("%sxr%d", w.cfg.ProcPrefix, i), j.queue, j.task)
			}
		}()
	}
	for _, q := range []string{RetryQueue, CancelQueue, TimeoutQueue} {
		w.knownMu.Lock()
		ids := append([]string(nil), w.xknown[q]...)
		w.knownMu.Unlock()
		if len(ids) > maxXReads {
			ids = ids[len(ids)-maxXReads:]
		}
		for _, id := range ids {
			if ctx.Err() != nil {
				break
			}
			jobs <- job{q, id}
		}
	}
	close(jobs)
	wg.Wait()
}
