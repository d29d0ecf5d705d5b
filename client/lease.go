package client

import (
	"context"
	"sync"
	"time"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Task is a claimed task as a Handler sees it.
type Task struct {
	p *docketv1.Task
	c *Client // the worker's, for ParentResults

	mu       sync.Mutex
	progress []byte
	ver      uint64 // bumped by SetProgress
	acked    uint64 // the version a heartbeat stored
}

// Proto returns the task record as claimed. Do not modify it.
func (t *Task) Proto() *docketv1.Task { return t.p }

// Info returns the task record as claimed, in Go types, with this
// claim's Fence.
func (t *Task) Info() *TaskInfo { return NewTaskInfo(t.p) }

// ID returns the task id.
func (t *Task) ID() string { return t.p.GetId() }

// Payload returns the task's payload. Do not modify it.
func (t *Task) Payload() []byte { return t.p.GetPayload() }

// Attempt returns which attempt this is, from 1: the claims of the task
// that ended without a Submit (nack, lease expiry), plus one.
func (t *Task) Attempt() uint32 { return t.p.GetAttempts() + 1 }

// Fence returns the fencing token of this claim. Pass it on with side
// effects so that a downstream can reject a worker that lost its lease.
func (t *Task) Fence() uint64 { return t.p.GetFence() }

// Progress returns the last checkpoint: the one set by SetProgress, or
// else the one stored by an earlier attempt, so a retry can resume. Do not
// modify it.
func (t *Task) Progress() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.progress
}

// SetProgress records a checkpoint that the next heartbeat stores on the
// task. Only the latest one is sent; it survives retries of the task.
func (t *Task) SetProgress(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.progress = append([]byte(nil), p...)
	t.ver++
}

// pendingProgress returns the checkpoint a heartbeat should carry, if any.
func (t *Task) pendingProgress() (p []byte, ver uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.progress, t.ver, t.ver > t.acked
}

// ackProgress records that a heartbeat stored checkpoint version ver.
func (t *Task) ackProgress(ver uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.acked = max(t.acked, ver)
}

// leaseKey names one claim: a task claimed again by this worker after it
// lost the first lease is a different lease.
type leaseKey struct {
	id    string
	fence uint64
}

// lease is one in-flight task of a Worker. The fields after timer are
// guarded by Worker.mu.
type lease struct {
	task   *Task
	ctx    context.Context // the handler's
	cancel context.CancelCauseFunc
	timer  *time.Timer // fires at deadline: the local lease expiry

	deadline  time.Time // past it, by the local clock, the lease may be gone
	finishing bool      // the handler returned; Submit or Nack is under way
	lost      bool      // the handler's ctx was cancelled for lease loss
	stopped   bool      // the handler's ctx was cancelled at the server's ask (cancel.go)
	gone      bool      // the server said so: Submit or Nack is pointless
}

// track registers a claimed task and arms its local expiry. sent is when
// the Claim was sent: the server's lease began later, so sent+Lease is a
// deadline that the server's clock cannot beat (barring clock rate drift).
func (w *Worker) track(parent context.Context, p *docketv1.Task, sent time.Time) *lease {
	ctx, cancel := context.WithCancelCause(parent)
	l := &lease{
		task:     &Task{p: p, c: w.c, progress: p.GetProgress()},
		ctx:      ctx,
		cancel:   cancel,
		deadline: sent.Add(w.cfg.Lease),
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	l.timer = time.AfterFunc(time.Until(l.deadline), func() { w.expire(l) })
	w.leases[leaseKey{p.GetId(), p.GetFence()}] = l
	return l
}

// untrack forgets a finished task and releases its timer and context.
func (w *Worker) untrack(l *lease) {
	w.mu.Lock()
	delete(w.leases, leaseKey{l.task.ID(), l.task.Fence()})
	l.timer.Stop()
	w.mu.Unlock()
	l.cancel(nil)
}

// beginFinish marks that the handler returned, so that heartbeat answers no
// longer cancel it, and reports whether the server already said the lease
// is gone.
func (w *Worker) beginFinish(l *lease) (gone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l.finishing = true
	return l.gone
}

// expire runs when a lease's local deadline passes without a successful
// heartbeat. The handler must stop: another worker may get the task.
func (w *Worker) expire(l *lease) {
	w.mu.Lock()
	if l.finishing || l.lost || time.Now().Before(l.deadline) {
		// Finished, already cancelled, or extended while this timer fired.
		w.mu.Unlock()
		return
	}
	l.lost = true
	w.mu.Unlock()
	w.log.Warn("lease expired by the local clock: no heartbeat succeeded in time; cancelling handler",
		"task", l.task.ID(), "fence", l.task.Fence())
	l.cancel(ErrLeaseLost)
}

// inFlight returns the number of tracked tasks.
func (w *Worker) inFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.leases)
}

// heartbeatLoop extends every in-flight lease once per HeartbeatInterval
// until ctx ends. Run owns it and cancels ctx once all handlers are done.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	tick := time.NewTicker(w.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			w.heartbeat(ctx)
		}
	}
}

// heartbeat sends one Heartbeat RPC for all in-flight leases and applies
// the answers: an OK extends the local deadline from the time the RPC was
// sent, and cancels the handler (cause ErrCancelRequested) when it says
// cancel_requested; STALE_FENCE, NOT_FOUND or WRONG_STATE cancel the
// handler for lease loss, TIMED_OUT for its execution deadline.
func (w *Worker) heartbeat(ctx context.Context) {
	type pending struct {
		l   *lease
		ver uint64
	}
	var ps []pending
	var items []*docketv1.HeartbeatItem
	w.mu.Lock()
	for _, l := range w.leases {
		if l.gone {
			continue
		}
		it := &docketv1.HeartbeatItem{TaskId: l.task.ID(), Fence: l.task.Fence(), Tenant: l.task.p.GetTenant(), LeaseNs: int64(w.cfg.Lease)}
		p, ver, dirty := l.task.pendingProgress()
		if dirty {
			it.Progress, it.HasProgress = p, true
		}
		items = append(items, it)
		ps = append(ps, pending{l, ver})
	}
	w.mu.Unlock()
	if len(items) == 0 {
		return
	}

	// Bounded by the interval so that a slow round does not delay the next.
	hctx, cancel := context.WithTimeout(ctx, w.cfg.HeartbeatInterval)
	defer cancel()
	sent := time.Now()
	res, err := w.c.Heartbeat(hctx, items...)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("heartbeat failed; leases expire by the local clock unless a later one succeeds",
				"tasks", len(items), "err", err)
		}
		return
	}

	var lost []*lease
	stop := map[*lease]error{}
	w.mu.Lock()
	for i, r := range res {
		p := ps[i]
		switch r.GetCode() {
		case docketv1.Code_CODE_OK:
			if !p.l.lost {
				p.l.deadline = sent.Add(w.cfg.Lease)
				p.l.timer.Reset(time.Until(p.l.deadline))
			}
			p.l.task.ackProgress(p.ver)
			if r.GetCancelRequested() && p.l.askStop() {
				stop[p.l] = ErrCancelRequested
			}
		case docketv1.Code_CODE_TIMED_OUT:
			// The server ends the claim itself (FAILED, or retried by the
			// task's policy): nothing left to report, nothing to beat.
			p.l.gone = true
			if p.l.askStop() {
				stop[p.l] = ErrTimedOut
			}
		case docketv1.Code_CODE_STALE_FENCE, docketv1.Code_CODE_NOT_FOUND, docketv1.Code_CODE_WRONG_STATE:
			if p.l.finishing {
				// The Submit or Nack racing this heartbeat ended the
				// lease; that is not a loss.
				continue
			}
			p.l.gone = true
			if !p.l.lost {
				p.l.lost = true
				lost = append(lost, p.l)
			}
		default:
			w.log.Warn("heartbeat rejected", "task", p.l.task.ID(), "err", ItemError(r))
		}
	}
	w.mu.Unlock()
	for _, l := range lost {
		w.log.Warn("lease lost: the server no longer runs the task under this fence; cancelling handler",
			"task", l.task.ID(), "fence", l.task.Fence())
		l.cancel(ErrLeaseLost)
	}
	for l, cause := range stop {
		w.log.Info("the server asked to stop the task; cancelling handler",
			"task", l.task.ID(), "fence", l.task.Fence(), "cause", cause)
		l.cancel(cause)
	}
}

// askStop marks that the server asked the handler to stop and reports
// whether its ctx is still to be cancelled: not when it returned, lost
// its lease, or was asked before. Called with Worker.mu held.
func (l *lease) askStop() bool {
	if l.finishing || l.lost || l.stopped {
		return false
	}
	l.stopped = true
	return true
}
