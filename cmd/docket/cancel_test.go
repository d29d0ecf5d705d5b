package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// waitLatched waits until the cluster latched level (the leader's latch
// loop runs after its barrier).
func waitLatched(t *testing.T, c *client.Client, level uint32) {
	t.Helper()
	testwait.For(t, 20*time.Second, "feature level latched", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := c.Status(ctx)
		return err == nil && st.GetEnabledFeatureLevel() >= level
	})
}

// blockingWorker runs a Worker on queue whose handler blocks until its ctx
// ends, and reports that ctx's cause on causes once per task. It returns
// a channel that gets each started task's id.
func blockingWorker(t *testing.T, c *client.Client, queue string) (started chan string, causes chan error) {
	t.Helper()
	started, causes = make(chan string, 4), make(chan error, 4)
	w, err := client.NewWorker(c, client.WorkerConfig{
		Queue: queue, Lease: 3 * time.Second, HeartbeatInterval: 100 * time.Millisecond, PollWait: 200 * time.Millisecond,
		ShutdownTimeout: 2 * time.Second,
	}, func(ctx context.Context, task *client.Task) ([]byte, error) {
		started <- task.ID()
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("worker did not stop")
		}
	})
	return started, causes
}

// recv waits for one value of ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// waitState polls a task until it reaches state, and returns it.
func waitState(t *testing.T, c *client.Client, id string, state pb.TaskState) *pb.Task {
	t.Helper()
	var task *pb.Task
	testwait.For(t, 15*time.Second, "task "+id+" "+state.String(), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		got, err := c.ReadTask(ctx, id)
		task = got
		return err == nil && got.GetState() == state
	})
	return task
}

// Test_WorkerCancelStopsHandler: Cancel of a running task, over a real
// in-process cluster, cancels the Worker's handler ctx with cause
// ErrCancelRequested at its next heartbeat, and the task ends CANCELLED
// from the Worker's Nack, not requeued.
func Test_WorkerCancelStopsHandler(t *testing.T) {
	nodes := startCluster(t, 1, testTune)
	c := mustClient(t, addrsOf(nodes)...)
	waitLatched(t, c, fsm.LevelCancelRunning)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	id, err := c.EnqueueOne(ctx, "cancel.me", []byte("long job"), client.TaskMaxAttempts(5))
	if err != nil {
		t.Fatal(err)
	}
	started, causes := blockingWorker(t, c, "cancel.me")
	if got := recv(t, started, "the handler to start"); got != id {
		t.Fatalf("handler got %s, want %s", got, id)
	}
	res, err := c.CancelTask(ctx, id)
	if err != nil || !res.Requested || res.State != pb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("CancelTask of the running task: %+v %v", res, err)
	}
	if cause := recv(t, causes, "the handler's ctx to end"); !errors.Is(cause, client.ErrCancelRequested) {
		t.Fatalf("handler ctx cause %v, want ErrCancelRequested", cause)
	}
	task := waitState(t, c, id, pb.TaskState_TASK_STATE_CANCELLED)
	h := task.GetHistory()
	if len(h) != 1 || h[0].GetOutcome() != pb.AttemptOutcome_ATTEMPT_OUTCOME_CANCELLED || !task.GetCancelRequested() {
		t.Fatalf("cancelled task %v", task)
	}
	// Cancelling again is a success; nothing runs it again.
	if again, err := c.CancelTask(ctx, id); err != nil || again.State != pb.TaskState_TASK_STATE_CANCELLED {
		t.Fatalf("second cancel: %+v %v", again, err)
	}
	select {
	case got := <-started:
		t.Fatalf("the cancelled task %s ran again", got)
	case <-time.After(500 * time.Millisecond):
	}
}

// Test_WorkerExecutionTimeout: a task with a 1s timeout whose handler
// blocks (the Worker keeps heartbeating) is stopped with cause
// ErrTimedOut and ends FAILED with a TIMED_OUT attempt; with
// retry_on_timeout it is retried and dead-lettered at max attempts.
func Test_WorkerExecutionTimeout(t *testing.T) {
	nodes := startCluster(t, 1, testTune)
	c := mustClient(t, addrsOf(nodes)...)
	waitLatched(t, c, fsm.LevelCancelRunning)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	id, err := c.EnqueueOne(ctx, "slow", []byte("x"), client.TaskTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	started, causes := blockingWorker(t, c, "slow")
	recv(t, started, "the handler to start")
	if cause := recv(t, causes, "the handler's ctx to end"); !errors.Is(cause, client.ErrTimedOut) {
		t.Fatalf("handler ctx cause %v, want ErrTimedOut", cause)
	}
	task := waitState(t, c, id, pb.TaskState_TASK_STATE_FAILED)
	h := task.GetHistory()
	if len(h) != 1 || h[0].GetOutcome() != pb.AttemptOutcome_ATTEMPT_OUTCOME_TIMED_OUT || task.GetDeadlineAt() == 0 {
		t.Fatalf("timed-out task %v", task)
	}

	retried, err := c.EnqueueOne(ctx, "slow", []byte("y"), client.TaskTimeout(500*time.Millisecond),
		client.TaskRetryOnTimeout(), client.TaskMaxAttempts(2))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		recv(t, started, "a claim of the retried task")
		recv(t, causes, "its handler's ctx to end")
	}
	task = waitState(t, c, retried, pb.TaskState_TASK_STATE_DEAD)
	if len(task.GetHistory()) != 2 || task.GetAttempts() != 2 {
		t.Fatalf("retried task %v", task)
	}
}
