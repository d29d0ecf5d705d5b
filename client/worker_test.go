package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/internal/testwait"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// fastConfig is a worker config whose timers suit a test: the lease runs
// out in 300ms, heartbeats go every 50ms.
func fastConfig() WorkerConfig {
	return WorkerConfig{
		Queue:             "q",
		Concurrency:       1,
		Lease:             300 * time.Millisecond,
		HeartbeatInterval: 50 * time.Millisecond,
		PollWait:          50 * time.Millisecond,
		ShutdownTimeout:   time.Second,
		Logger:            testLogger(),
	}
}

// workerRun is a Worker's Run in progress.
type workerRun struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // Run's answer, once done is closed
}

// startWorker runs w until the test ends or stop is called.
func startWorker(t *testing.T, w *Worker) *workerRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &workerRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = w.Run(ctx)
	}()
	t.Cleanup(func() { _ = r.stop(t) })
	return r
}

// stop cancels Run's ctx and returns Run's error, failing the test if Run
// does not return.
func (r *workerRun) stop(t *testing.T) error {
	r.cancel()
	select {
	case <-r.done:
		return r.err
	case <-time.After(3 * time.Second):
		t.Errorf("Run did not return after its ctx was cancelled")
		return nil
	}
}

func mustWorker(t *testing.T, c *Client, cfg WorkerConfig, h Handler) *Worker {
	t.Helper()
	w, err := NewWorker(c, cfg, h)
	if err != nil {
		t.Fatalf("new worker: %v", err)
	}
	return w
}

func (fc *fakeCluster) state(id string) docketv1.TaskState { return fc.task(id).GetState() }

func Test_Worker_CompletesWithFence(t *testing.T) {
	fc := newFakeCluster(t, 3)
	c := mustClient(t, fc.addrs()...)
	var ids []string
	for i := range 5 {
		ids = append(ids, mustEnqueue(t, c, "q", fmt.Sprintf("p%d", i)))
	}
	cfg := fastConfig()
	cfg.Concurrency = 2
	var fences sync.Map // task id -> fence the handler saw
	w := mustWorker(t, c, cfg, func(ctx context.Context, task *Task) ([]byte, error) {
		fences.Store(task.ID(), task.Fence())
		return bytes.ToUpper(task.Payload()), nil
	})
	r := startWorker(t, w)

	testwait.For(t, time.Second, "all tasks completed", func() bool {
		for _, id := range ids {
			if fc.state(id) != docketv1.TaskState_TASK_STATE_COMPLETED {
				return false
			}
		}
		return true
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil after ctx cancel", err)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.submits) != len(ids) {
		t.Fatalf("%d submits, want %d", len(fc.submits), len(ids))
	}
	for _, s := range fc.submits {
		task := fc.tasks[s.GetTaskId()]
		f, _ := fences.Load(s.GetTaskId())
		if s.GetFence() != task.GetFence() || s.GetFence() != f.(uint64) || s.GetFence() == 0 {
			t.Fatalf("submit of %s carried fence %d, claim fence %d", s.GetTaskId(), s.GetFence(), task.GetFence())
		}
		if want := bytes.ToUpper(task.GetPayload()); !bytes.Equal(s.GetResult(), want) {
			t.Fatalf("result %q, want %q", s.GetResult(), want)
		}
	}
}

func Test_Worker_NacksOnErrorAndFailsOnPermanent(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	retry := mustEnqueue(t, c, "q", "retry")
	perm := mustEnqueue(t, c, "q", "perm")
	var secondAttempt atomic.Bool
	w := mustWorker(t, c, fastConfig(), func(ctx context.Context, task *Task) ([]byte, error) {
		switch string(task.Payload()) {
		case "perm":
			return nil, Permanent(errors.New("bad input"))
		case "retry":
			if task.Attempt() == 1 {
				return nil, errors.New("boom")
			}
			secondAttempt.Store(true)
		}
		return []byte("ok"), nil
	})
	startWorker(t, w)

	testwait.For(t, time.Second, "both tasks finished", func() bool {
		return fc.state(retry) == docketv1.TaskState_TASK_STATE_COMPLETED &&
			fc.state(perm) == docketv1.TaskState_TASK_STATE_FAILED
	})
	if !secondAttempt.Load() {
		t.Fatal("the nacked task was not run as attempt 2")
	}
	if got := fc.task(perm).GetLastError(); got != "bad input" {
		t.Fatalf("failed task error = %q, want %q", got, "bad input")
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.nacks) != 1 || fc.nacks[0].GetTaskId() != retry || fc.nacks[0].GetReason() != "boom" || fc.nacks[0].GetFence() == 0 {
		t.Fatalf("nacks = %v, want one for %s with reason boom and its fence", fc.nacks, retry)
	}
}

func Test_Worker_HeartbeatsAreBatchedWithProgress(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	for i := range 3 {
		mustEnqueue(t, c, "q", fmt.Sprint(i))
	}
	cfg := fastConfig()
	cfg.Concurrency = 3
	release := make(chan struct{})
	w := mustWorker(t, c, cfg, func(ctx context.Context, task *Task) ([]byte, error) {
		task.SetProgress([]byte("at:" + task.ID()))
		select {
		case <-release:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	startWorker(t, w)

	// Several beats of three items each: the handlers outlive the 300ms
	// lease only because of them.
	testwait.For(t, time.Second, "three heartbeats of three items", func() bool {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		n := 0
		for _, hb := range fc.heartbeats {
			if len(hb) == 3 {
				n++
			}
		}
		return n >= 3 && len(fc.heartbeats) >= 8
	})
	fc.mu.Lock()
	// One claim took all three for the three free slots; with every slot
	// busy the worker does not claim again.
	if !slices.Equal(fc.claimMax, []uint32{3}) {
		t.Errorf("claims asked for %v tasks, want one claim of 3", fc.claimMax)
	}
	for id, task := range fc.tasks {
		if string(task.GetProgress()) != "at:"+id {
			t.Errorf("task %s progress = %q", id, task.GetProgress())
		}
	}
	// Progress is sent once, then only again when it changes.
	withProgress := 0
	for _, hb := range fc.heartbeats {
		for _, it := range hb {
			if it.GetHasProgress() {
				withProgress++
			}
		}
	}
	fc.mu.Unlock()
	if withProgress != 3 {
		t.Errorf("%d heartbeat items carried progress, want 3", withProgress)
	}
	close(release)
	testwait.For(t, time.Second, "tasks completed", func() bool {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		return len(fc.submits) == 3
	})
}

func Test_Worker_StaleFenceCancelsHandler(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	id := mustEnqueue(t, c, "q", "x")
	fc.mu.Lock()
	fc.staleHB[id] = true
	fc.mu.Unlock()
	cfg := fastConfig()
	cfg.Lease = 10 * time.Second // only the heartbeat answer can end the lease
	causes := make(chan error, 1)
	w := mustWorker(t, c, cfg, func(ctx context.Context, task *Task) ([]byte, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	r := startWorker(t, w)

	select {
	case cause := <-causes:
		if !errors.Is(cause, ErrLeaseLost) {
			t.Fatalf("handler ctx cause = %v, want ErrLeaseLost", cause)
		}
	case <-time.After(time.Second):
		t.Fatal("handler ctx was not cancelled after a STALE_FENCE heartbeat")
	}
	testwait.For(t, time.Second, "handler finished", func() bool { return w.inFlight() == 0 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.submits)+len(fc.nacks) != 0 {
		t.Fatalf("a lost lease was reported: submits %v nacks %v", fc.submits, fc.nacks)
	}
}

func Test_Worker_LeaseExpiresByLocalClock(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	mustEnqueue(t, c, "q", "x")
	fc.setHooks(func(m string) error {
		if m == "Heartbeat" {
			return status.Error(codes.Unavailable, "partitioned")
		}
		return nil
	}, nil)
	started := make(chan time.Time, 1)
	causes := make(chan error, 1)
	w := mustWorker(t, c, fastConfig(), func(ctx context.Context, task *Task) ([]byte, error) {
		started <- time.Now()
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	startWorker(t, w)

	var at time.Time
	select {
	case at = <-started:
	case <-time.After(time.Second):
		t.Fatal("handler did not start")
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, ErrLeaseLost) {
			t.Fatalf("cause = %v, want ErrLeaseLost", cause)
		}
		if held := time.Since(at); held > 400*time.Millisecond {
			t.Fatalf("handler ran %v without a heartbeat, past the 300ms lease", held)
		}
	case <-time.After(time.Second):
		t.Fatal("handler ctx was not cancelled when the lease ran out")
	}
	if fc.countAll("Heartbeat") == 0 {
		t.Fatal("no heartbeat was tried")
	}
}

func Test_Worker_GracefulShutdownWaitsForHandlers(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	id := mustEnqueue(t, c, "q", "x")
	running := make(chan struct{})
	release := make(chan struct{})
	w := mustWorker(t, c, fastConfig(), func(ctx context.Context, task *Task) ([]byte, error) {
		close(running)
		<-release // ignores ctx: shutdown must not cancel it before the timeout
		return []byte("done"), nil
	})
	r := startWorker(t, w)
	<-running

	r.cancel()
	// Run keeps heartbeating the in-flight task after its ctx ended.
	beats := fc.countAll("Heartbeat")
	testwait.For(t, time.Second, "heartbeats after shutdown began", func() bool { return fc.countAll("Heartbeat") >= beats+3 })
	select {
	case <-r.done:
		t.Fatalf("Run returned %v while a handler was running", r.err)
	default:
	}
	claims := fc.countAll("Claim")
	close(release)
	select {
	case <-r.done:
		if r.err != nil {
			t.Fatalf("Run = %v", r.err)
		}
	case <-time.After(time.Second):
		t.Fatal("Run did not return after the handler finished")
	}
	if fc.state(id) != docketv1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("task state %v, want COMPLETED", fc.state(id))
	}
	if n := fc.countAll("Claim"); n != claims {
		t.Fatalf("claimed during shutdown: %d claims, want %d", n, claims)
	}
}

func Test_Worker_ShutdownTimeoutCancelsAndNacks(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	id := mustEnqueue(t, c, "q", "x")
	cfg := fastConfig()
	cfg.ShutdownTimeout = 100 * time.Millisecond
	running := make(chan struct{})
	w := mustWorker(t, c, cfg, func(ctx context.Context, task *Task) ([]byte, error) {
		close(running)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	r := startWorker(t, w)
	<-running
	start := time.Now()
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if elapsed := time.Since(start); elapsed < 100*time.Millisecond || elapsed > time.Second {
		t.Fatalf("shutdown took %v, want about the 100ms timeout", elapsed)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.nacks) != 1 || fc.nacks[0].GetTaskId() != id || !strings.Contains(fc.nacks[0].GetReason(), ErrShutdownTimeout.Error()) {
		t.Fatalf("nacks = %v, want one for %s naming the shutdown timeout", fc.nacks, id)
	}
	if fc.tasks[id].GetState() != docketv1.TaskState_TASK_STATE_PENDING {
		t.Fatalf("task state %v, want PENDING again", fc.tasks[id].GetState())
	}
}

func Test_Worker_PanicIsNacked(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	id := mustEnqueue(t, c, "q", "x")
	w := mustWorker(t, c, fastConfig(), func(ctx context.Context, task *Task) ([]byte, error) {
		if task.Attempt() == 1 {
			panic("kaboom")
		}
		return nil, nil
	})
	startWorker(t, w)
	testwait.For(t, time.Second, "task completed on attempt 2", func() bool {
		return fc.state(id) == docketv1.TaskState_TASK_STATE_COMPLETED
	})
	if got := fc.task(id).GetLastError(); !strings.Contains(got, "kaboom") {
		t.Fatalf("last error = %q, want the panic", got)
	}
}

func Test_Worker_Config(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	h := func(context.Context, *Task) ([]byte, error) { return nil, nil }
	if _, err := NewWorker(c, WorkerConfig{}, h); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty queue: %v", err)
	}
	if _, err := NewWorker(c, WorkerConfig{Queue: "q", Lease: time.Second, HeartbeatInterval: time.Second}, h); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("heartbeat not shorter than lease: %v", err)
	}
	w := mustWorker(t, c, WorkerConfig{Queue: "q", PollWait: time.Minute}, h)
	cfg := w.Config()
	if cfg.Lease != DefaultLease || cfg.HeartbeatInterval != DefaultLease/3 || cfg.PollWait != DefaultLease/3 ||
		cfg.Concurrency != 1 || cfg.ShutdownTimeout != DefaultShutdownTimeout || cfg.WorkerID == "" {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
}

func Test_Worker_NoGoroutineLeak(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	mustEnqueue(t, c, "q", "warm-up") // connect first: the conn's goroutines are not the worker's
	base := runtime.NumGoroutine()

	for i := range 4 {
		mustEnqueue(t, c, "q", fmt.Sprint(i))
	}
	cfg := fastConfig()
	cfg.Concurrency = 3
	var done atomic.Int32
	w := mustWorker(t, c, cfg, func(ctx context.Context, task *Task) ([]byte, error) {
		done.Add(1)
		return nil, nil
	})
	r := startWorker(t, w)
	testwait.For(t, time.Second, "tasks handled", func() bool { return done.Load() == 5 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, time.Second, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= base })
	if err := w.Run(ctxTimeout(t, 10*time.Millisecond)); err != nil {
		t.Fatalf("a second Run after the first returned: %v", err)
	}
}
