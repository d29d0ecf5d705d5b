package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Worker errors.
var (
	// ErrPermanent marks a handler error as final: the Worker submits the
	// task as FAILED instead of nacking it for another attempt. Wrap it
	// with Permanent, or with fmt.Errorf("...: %w", ErrPermanent).
	ErrPermanent = errors.New("docket: permanent failure")

	// ErrLeaseLost is the cause (context.Cause) of a handler's ctx when the
	// Worker lost the task's lease: a heartbeat was answered STALE_FENCE or
	// NOT_FOUND, or no heartbeat succeeded before the lease ran out by the
	// local clock. The task may already run elsewhere; stop working on it.
	ErrLeaseLost = errors.New("docket: lease lost")

	// ErrShutdownTimeout is the cause of a handler's ctx when the Worker's
	// ShutdownTimeout ran out before the handler returned. The task is
	// nacked so that another worker takes it at once.
	ErrShutdownTimeout = errors.New("docket: worker shutdown timeout")
)

// Permanent marks err as a final failure (see ErrPermanent). The task's
// error text stays err's text.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() []error { return []error{e.err, ErrPermanent} }

// RetryAfter asks the Worker to nack the task with a delay of d before its
// next attempt, instead of at once.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err, d}
}

type retryAfterError struct {
	err   error
	delay time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// Handler runs one task. A nil error completes the task with result. Any
// other error nacks it for another attempt, unless it wraps ErrPermanent,
// which fails it for good. ctx is cancelled when the lease is lost
// (cause ErrLeaseLost), when shutdown runs out of time (cause
// ErrShutdownTimeout), when an operator cancelled the task (cause
// ErrCancelRequested: the task then ends CANCELLED however the handler
// returns) or when it ran past its execution timeout (cause ErrTimedOut);
// a handler must then return promptly.
type Handler func(ctx context.Context, t *Task) (result []byte, err error)

// WorkerConfig configures a Worker. Only Queue is required.
type WorkerConfig struct {
	// Queue is the queue to claim from.
	Queue string

	// Tenant is the tenant to claim from; empty means the server's
	// default tenant (docketv1.DefaultTenant, "default").
	Tenant string

	// WorkerID names this worker on claimed tasks (Task.worker_id), for
	// operators. The default is hostname-pid-random, unique per process.
	WorkerID string

	// Concurrency is how many handlers run at once. Claims ask for as many
	// tasks as there are free slots. The default is 1.
	Concurrency int

	// Lease is how long a claim or a heartbeat keeps a task. A longer lease
	// rides out longer network trouble; a shorter one gets a crashed
	// worker's tasks back sooner. The default is 30s.
	Lease time.Duration

	// HeartbeatInterval is how often the Worker extends all its leases in
	// one Heartbeat RPC. The default is Lease/3, which leaves two more tries
	// before a lease runs out. It must be shorter than Lease.
	HeartbeatInterval time.Duration

	// PollWait is how long one Claim long-polls for work. The default is
	// 10s. It is clamped to Lease/3: the local lease clock starts when the
	// Claim is sent, so a long wait would eat the first heartbeat's time.
	PollWait time.Duration

	// ShutdownTimeout bounds how long Run waits, after its ctx ends, for
	// in-flight handlers (which keep heartbeating) to return. Then their
	// ctx is cancelled and their tasks are nacked. The default is 20s,
	// which leaves time for the nacks inside a 30s orchestrator grace
	// period (Kubernetes' default).
	ShutdownTimeout time.Duration

	// Logger defaults to the Client's logger.
	Logger *slog.Logger
}

// Defaults for WorkerConfig.
const (
	// DefaultLease is the server's default lease too (docketv1.DefaultLease).
	DefaultLease           = docketv1.DefaultLease
	DefaultPollWait        = 10 * time.Second
	DefaultShutdownTimeout = 20 * time.Second
)

// claimSlack is the time a Claim call gets beyond its long-poll wait.
const claimSlack = 5 * time.Second

// reasonLimit caps the error text sent with a Nack or a failed Submit, so a
// huge error message cannot make the call itself fail as too large.
const reasonLimit = 4 << 10

// Worker claims tasks from one queue and runs a Handler on each, with
// automatic heartbeats. Make one with NewWorker and call Run.
type Worker struct {
	c       *Client
	cfg     WorkerConfig
	h       Handler
	log     *slog.Logger
	running atomic.Bool
	// claiming is true while Run's claim loop runs: a handler's report
	// then claims the worker's next task with it (ride).
	claiming atomic.Bool

	mu     sync.Mutex
	leases map[leaseKey]*lease
}

// NewWorker checks cfg, fills in its defaults and returns a Worker.
func NewWorker(c *Client, cfg WorkerConfig, h Handler) (*Worker, error) {
	if c == nil || h == nil {
		return nil, fmt.Errorf("new worker: %w: nil client or handler", ErrInvalidArgument)
	}
	if cfg.Queue == "" {
		return nil, fmt.Errorf("new worker: %w: field Queue: empty", ErrInvalidArgument)
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = defaultWorkerID()
	}
	cfg.Concurrency = max(cfg.Concurrency, 1)
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = cfg.Lease / 3
	}
	if cfg.HeartbeatInterval >= cfg.Lease {
		return nil, fmt.Errorf("new worker: %w: field HeartbeatInterval: %v is not shorter than Lease %v",
			ErrInvalidArgument, cfg.HeartbeatInterval, cfg.Lease)
	}
	if cfg.PollWait <= 0 {
		cfg.PollWait = DefaultPollWait
	}
	cfg.PollWait = min(cfg.PollWait, cfg.Lease/3, MaxWait)
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = c.log
	}
	return &Worker{
		c:      c,
		cfg:    cfg,
		h:      h,
		log:    log.With("worker", cfg.WorkerID, "queue", cfg.Queue),
		leases: make(map[leaseKey]*lease),
	}, nil
}

// Work runs a Worker of cfg and h on c until ctx ends: NewWorker and
// Run in one call, for a program that runs one worker (as
// http.ListenAndServe is a Server and its ListenAndServe). It returns
// NewWorker's error or Run's.
func (c *Client) Work(ctx context.Context, cfg WorkerConfig, h Handler) error {
	w, err := NewWorker(c, cfg, h)
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// Config returns the configuration with its defaults filled in.
func (w *Worker) Config() WorkerConfig { return w.cfg }

// Run claims and handles tasks until ctx ends, then shuts down gracefully:
// it stops claiming, waits up to ShutdownTimeout for in-flight handlers
// (their leases are still heartbeated), then cancels the rest and nacks
// their tasks. It returns nil after a shutdown caused by ctx, and an error
// when claiming cannot work (the Client was closed, or the server rejects
// the queue as invalid). Run returns only when every goroutine it started
// has stopped. A Worker runs at most one Run at a time.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("docket: worker: Run is already running")
	}
	defer w.running.Store(false)

	// Handlers and heartbeats outlive ctx: shutdown waits for them. Each
	// has its own cancel, owned by this function.
	hctx, stopHandlers := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopHandlers(nil)
	beatCtx, stopBeats := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBeats()
	beatsDone := make(chan struct{})
	go func() {
		defer close(beatsDone)
		w.heartbeatLoop(beatCtx)
	}()

	var handlers sync.WaitGroup
	w.claiming.Store(true)
	err := w.claimLoop(ctx, hctx, &handlers)
	w.claiming.Store(false)

	w.log.Info("worker stopping: no more claims, waiting for in-flight tasks",
		"in_flight", w.inFlight(), "timeout", w.cfg.ShutdownTimeout)
	drained := make(chan struct{})
	go func() {
		handlers.Wait()
		close(drained)
	}()
	timer := time.NewTimer(w.cfg.ShutdownTimeout)
	select {
	case <-drained:
	case <-timer.C:
		w.log.Warn("shutdown timeout: cancelling in-flight handlers", "in_flight", w.inFlight())
		stopHandlers(ErrShutdownTimeout)
		<-drained
	}
	timer.Stop()
	stopBeats()
	<-beatsDone
	w.log.Info("worker stopped")
	return err
}

// claimLoop claims while ctx lasts, as many tasks as there are free slots,
// and starts a handler for each. It returns nil when ctx ends.
func (w *Worker) claimLoop(ctx, hctx context.Context, handlers *sync.WaitGroup) error {
	// A token in slots is a busy slot; its handler takes it out when done.
	slots := make(chan struct{}, w.cfg.Concurrency)
	failures := 0
	for {
		// Wait for a free slot: claiming work we cannot start would only
		// hold its lease hostage.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		n := 1
	fill:
		for n < cap(slots) {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break fill
			}
		}

		sent := time.Now()
		cctx, cancel := context.WithTimeout(ctx, w.cfg.PollWait+claimSlack)
		tasks, err := w.c.Claim(cctx, &docketv1.ClaimRequest{
			Queue:    w.cfg.Queue,
			Tenant:   w.cfg.Tenant,
			WorkerId: w.cfg.WorkerID,
			LeaseNs:  int64(w.cfg.Lease),
			MaxTasks: uint32(n),
			WaitNs:   int64(w.cfg.PollWait),
		})
		cancel()
		if len(tasks) > n {
			w.log.Error("server returned more tasks than asked; giving the extra back", "asked", n, "got", len(tasks))
			w.giveBack(tasks[n:])
			tasks = tasks[:n]
		}
		for _, t := range tasks {
			w.start(hctx, t, sent, slots, handlers)
		}
		for range n - len(tasks) {
			<-slots
		}

		if err != nil {
			if ctx.Err() != nil {
				// The long-poll was cut short. If the server had claimed
				// tasks for it, their leases expire and they return.
				return nil
			}
			if errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidArgument) {
				return fmt.Errorf("worker: claim from %q: %w", w.cfg.Queue, err)
			}
			w.log.Warn("claim failed; backing off", "err", err, "failures", failures+1)
			if sleepCtx(ctx, w.c.backoff(failures)) != nil {
				return nil
			}
			failures++
			continue
		}
		failures = 0
	}
}

// start runs the handler of a claimed task in a goroutine that Run waits
// for through handlers. The goroutine frees its slot when done.
func (w *Worker) start(hctx context.Context, t *docketv1.Task, sent time.Time, slots chan struct{}, handlers *sync.WaitGroup) {
	l := w.track(hctx, t, sent)
	handlers.Add(1)
	go func() {
		defer handlers.Done()
		defer func() { <-slots }()
		for l != nil {
			result, err := w.call(l.ctx, l.task)
			next, sent := w.finish(l, result, err)
			l = nil
			if next != nil {
				// Claimed with the report: it runs in the slot it freed.
				l = w.track(hctx, next, sent)
			}
		}
	}()
}

// ride is the claim of one task that a handler's report carries while the
// claim loop runs (SubmitAndClaim): the handler's slot is about to be
// free, and the task runs in it, without a Claim of its own. Nil once
// the worker stops claiming.
func (w *Worker) ride() *docketv1.ClaimRequest {
	if !w.claiming.Load() {
		return nil
	}
	return &docketv1.ClaimRequest{Queue: w.cfg.Queue, Tenant: w.cfg.Tenant, WorkerId: w.cfg.WorkerID,
		LeaseNs: int64(w.cfg.Lease), MaxTasks: 1}
}

// keep returns the task a report claimed, and when its claim was sent,
// if the worker still claims; otherwise it gives the task back.
func (w *Worker) keep(r submitResult, sent time.Time) (*docketv1.Task, time.Time) {
	if r.next == nil {
		return nil, time.Time{}
	}
	if !w.claiming.Load() {
		w.giveBack([]*docketv1.Task{r.next})
		return nil, time.Time{}
	}
	return r.next, sent
}

// call runs the handler, turning a panic into an error so that one bad task
// is nacked instead of killing the process.
func (w *Worker) call(ctx context.Context, t *Task) (result []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("handler panicked", "task", t.ID(), "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return w.h(ctx, t)
}

// finish reports the handler's outcome under the task's fence: Submit
// COMPLETED on success, Submit FAILED for ErrPermanent, Nack otherwise.
// Heartbeats go on until it returns, so a slow Submit keeps its lease. A
// Submit claims the worker's next task with it while the worker claims
// (ride); finish returns that task and when its claim was sent.
func (w *Worker) finish(l *lease, result []byte, herr error) (*docketv1.Task, time.Time) {
	defer w.untrack(l)
	t := l.task
	log := w.log.With("task", t.ID(), "fence", t.Fence(), "attempt", t.Attempt())
	if w.beginFinish(l) {
		log.Warn("the server ended the claim (lease lost or execution timeout): dropping the handler's outcome",
			"cause", context.Cause(l.ctx), "handler_err", herr)
		return nil, time.Time{}
	}
	// The handler's ctx may be cancelled (shutdown timeout); the report
	// must still go out, bounded by the lease it is about.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), min(w.cfg.Lease, 10*time.Second))
	defer cancel()

	switch {
	case herr == nil:
		sent := time.Now()
		r := w.c.submitRiding(ctx, &docketv1.SubmitRequest{
			TaskId: t.ID(), Fence: t.Fence(), Tenant: t.p.GetTenant(), Outcome: docketv1.Outcome_OUTCOME_COMPLETED, Result: result,
		}, w.ride())
		w.logReport(log, "completed", r.err, "already_done", r.alreadyDone)
		return w.keep(r, sent)
	case errors.Is(herr, ErrPermanent):
		sent := time.Now()
		r := w.c.submitRiding(ctx, &docketv1.SubmitRequest{
			TaskId: t.ID(), Fence: t.Fence(), Tenant: t.p.GetTenant(), Outcome: docketv1.Outcome_OUTCOME_FAILED, Error: truncate(herr.Error()),
		}, w.ride())
		w.logReport(log, "failed", r.err, "already_done", r.alreadyDone, "handler_err", herr)
		return w.keep(r, sent)
	default:
		var delay time.Duration
		var ra *retryAfterError
		if errors.As(herr, &ra) {
			delay = ra.delay
		}
		reason := herr.Error()
		if cause := context.Cause(l.ctx); cause != nil && errors.Is(herr, context.Canceled) {
			reason = fmt.Sprintf("%v (%v)", herr, cause)
		}
		state, err := w.c.Nack(ctx, &docketv1.NackRequest{
			TaskId: t.ID(), Fence: t.Fence(), Tenant: t.p.GetTenant(), DelayNs: int64(delay), Reason: truncate(reason),
		})
		w.logReport(log, "nacked", err, "state", state, "delay", delay, "handler_err", herr)
		return nil, time.Time{}
	}
}

// logReport logs the outcome of a Submit or Nack at a level that matches
// what an operator should do about it.
func (w *Worker) logReport(log *slog.Logger, what string, err error, args ...any) {
	switch {
	case err == nil:
		log.Debug("task "+what, args...)
	case errors.Is(err, ErrCancelled):
		log.Info("task "+what+" after it was cancelled: the task ended CANCELLED and its result was dropped", args...)
	case errors.Is(err, ErrStaleFence), errors.Is(err, ErrNotFound):
		log.Warn("task "+what+" too late: the lease was lost", append(args, "err", err)...)
	case errors.Is(err, ErrOutcomeUnknown):
		log.Warn("task "+what+": outcome unknown; the lease expires if it was not applied", append(args, "err", err)...)
	default:
		log.Error("task "+what+": report failed; the lease will expire", append(args, "err", err)...)
	}
}

// giveBack hands back tasks this worker cannot run, so they need not wait
// for their leases to expire. It snoozes them without a delay: they are
// claimable at once and spend no attempt, since no handler saw them; a
// Nack would count a failure, and dead-letter a task at its last attempt.
// A cluster older than Snooze is sent the Nack.
func (w *Worker) giveBack(tasks []*docketv1.Task) {
	ctx, cancel := context.WithTimeout(context.Background(), min(w.cfg.Lease, 10*time.Second))
	defer cancel()
	for _, t := range tasks {
		_, err := w.c.snoozeAs(ctx, t.GetId(), t.GetFence(), t.GetTenant(), 0)
		if errors.Is(err, ErrFeatureDisabled) || status.Code(err) == codes.Unimplemented {
			_, err = w.c.Nack(ctx, &docketv1.NackRequest{TaskId: t.GetId(), Fence: t.GetFence(), Tenant: t.GetTenant(), Reason: "worker had no free slot"})
		}
		if err != nil {
			w.log.Warn("giving back a task failed; its lease will expire", "task", t.GetId(), "err", err)
		}
	}
}

// truncate cuts s to reasonLimit bytes without splitting a UTF-8 rune.
func truncate(s string) string {
	if len(s) <= reasonLimit {
		return s
	}
	cut := reasonLimit
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
