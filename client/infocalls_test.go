package client_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
)

// These tests run against the Examples' node (example_main_test.go): the
// production service and gRPC server on loopback, found by WithEnv.

func newExamplesClient(t *testing.T) (context.Context, *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	c, err := client.New(ctx, nil, client.WithEnv())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return ctx, c
}

// claimOne claims the one task of queue, or fails the test.
func claimOne(ctx context.Context, t *testing.T, c *client.Client, queue string) *client.TaskInfo {
	t.Helper()
	got, err := c.ClaimTasks(ctx, queue, client.ClaimMax(5), client.ClaimLease(time.Minute), client.ClaimWorkerID("tester"))
	if err != nil {
		t.Fatalf("ClaimTasks %s: %v", queue, err)
	}
	if len(got) != 1 {
		t.Fatalf("ClaimTasks %s: %d tasks, want 1", queue, len(got))
	}
	return got[0]
}

func Test_GetAndGetStale(t *testing.T) {
	ctx, c := newExamplesClient(t)
	before := time.Now()
	id, err := c.EnqueueOne(ctx, "info-get", []byte("hello"), client.TaskPriority(4), client.TaskMaxAttempts(3), client.TaskDelay(time.Hour))
	if err != nil {
		t.Fatalf("EnqueueOne: %v", err)
	}
	for name, get := range map[string]func(context.Context, string) (*client.TaskInfo, error){"Get": c.Get, "GetStale": c.GetStale} {
		ti, err := get(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ti.ID != id || ti.Queue != "info-get" || ti.Tenant != "default" || ti.State != client.StateDelayed ||
			ti.Priority != 4 || ti.MaxAttempts != 3 || string(ti.Payload) != "hello" || ti.Outcome != client.OutcomeNone {
			t.Errorf("%s: %+v", name, ti)
		}
		if ti.CreatedAt.Before(before.Add(-time.Minute)) || ti.VisibleAt.Sub(ti.CreatedAt) < 59*time.Minute || !ti.FinishedAt.IsZero() {
			t.Errorf("%s: created %v, visible %v, finished %v", name, ti.CreatedAt, ti.VisibleAt, ti.FinishedAt)
		}
		if ti.Proto().GetId() != id {
			t.Errorf("%s: Proto() is of %q", name, ti.Proto().GetId())
		}
	}
	if _, err := c.Get(ctx, "no-such-task"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Get of an unknown id: %v, want ErrNotFound", err)
	}
}

// A task claimed by hand and completed: ClaimTasks carries the fence,
// CompleteClaim stores the result, Wait returns it finished, without the
// fence; a read's TaskInfo, which has none, cannot complete the task.
func Test_ClaimTasksCompleteAndWait(t *testing.T) {
	ctx, c := newExamplesClient(t)
	id, err := c.EnqueueOne(ctx, "info-complete", []byte("in"))
	if err != nil {
		t.Fatalf("EnqueueOne: %v", err)
	}
	read, err := c.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	ti := claimOne(ctx, t, c, "info-complete")
	if ti.ID != id || ti.State != client.StateRunning || ti.Fence == 0 || ti.WorkerID != "tester" || ti.LeaseUntil.Sub(ti.ClaimedAt) != time.Minute {
		t.Fatalf("claimed: %+v", ti)
	}
	if _, err := c.CompleteClaim(ctx, read, []byte("forged")); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("CompleteClaim with a read's TaskInfo (no fence): %v, want ErrInvalidArgument", err)
	}
	if done, err := c.CompleteClaim(ctx, ti, []byte("out")); err != nil || done {
		t.Fatalf("CompleteClaim: done %v, %v", done, err)
	}
	if done, err := c.CompleteClaim(ctx, ti, []byte("out")); err != nil || !done {
		t.Errorf("CompleteClaim again: done %v, %v; want already done", done, err)
	}
	got, err := c.Wait(ctx, id)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got.State != client.StateCompleted || got.Outcome != client.OutcomeCompleted || !bytes.Equal(got.Result, []byte("out")) ||
		got.Fence != 0 || got.FinishedAt.IsZero() || !got.State.Finished() {
		t.Errorf("Wait: %+v", got)
	}
}

// Wait ends with ctx for a task that does not finish.
func Test_WaitEndsWithCtx(t *testing.T) {
	ctx, c := newExamplesClient(t)
	id, err := c.EnqueueOne(ctx, "info-wait", nil, client.TaskDelay(time.Hour))
	if err != nil {
		t.Fatalf("EnqueueOne: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if ti, err := c.Wait(wctx, id); !errors.Is(err, context.DeadlineExceeded) || ti != nil {
		t.Errorf("Wait: %v, %v; want a deadline error", ti, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Wait took %v past a 300ms deadline", d)
	}
}

// FailClaim fails a task for good; NackClaim gives one back, and the last
// attempt's Nack makes it a dead letter.
func Test_FailClaimAndNackClaim(t *testing.T) {
	ctx, c := newExamplesClient(t)
	failed, err := c.EnqueueOne(ctx, "info-fail", nil)
	if err != nil {
		t.Fatalf("EnqueueOne: %v", err)
	}
	if _, err := c.FailClaim(ctx, claimOne(ctx, t, c, "info-fail"), "no recipient"); err != nil {
		t.Fatalf("FailClaim: %v", err)
	}
	got, err := c.Wait(ctx, failed)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got.State != client.StateFailed || got.Outcome != client.OutcomeFailed || got.LastError != "no recipient" {
		t.Errorf("failed task: %+v", got)
	}

	nacked, err := c.EnqueueOne(ctx, "info-nack", nil, client.TaskMaxAttempts(2))
	if err != nil {
		t.Fatalf("EnqueueOne: %v", err)
	}
	for i, want := range []client.State{client.StatePending, client.StateDead} {
		s, err := c.NackClaim(ctx, claimOne(ctx, t, c, "info-nack"), 0, "busy")
		if err != nil || s != want {
			t.Fatalf("NackClaim %d: %v, %v; want %v", i+1, s, err, want)
		}
	}
	got, err = c.Get(ctx, nacked)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.State != client.StateDead || got.Attempts != 2 || got.LastError != "busy" {
		t.Errorf("nacked task: %+v", got)
	}
	if _, err := c.NackClaim(ctx, nil, 0, ""); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("NackClaim(nil): %v, want ErrInvalidArgument", err)
	}
}

// A long poll on an empty queue ends with no tasks and no error.
func Test_ClaimTasksEmptyQueue(t *testing.T) {
	ctx, c := newExamplesClient(t)
	start := time.Now()
	got, err := c.ClaimTasks(ctx, "info-empty", client.ClaimWait(200*time.Millisecond))
	if err != nil || len(got) != 0 {
		t.Fatalf("ClaimTasks: %v, %v; want none", got, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("ClaimTasks returned after %v, before its wait", d)
	}
}

// GetParents reads a child's parents in Go types, from the Client and
// from the claimed Task a handler gets.
func Test_GetParents(t *testing.T) {
	ctx, c := newExamplesClient(t)
	parent, err := c.EnqueueOne(ctx, "info-parent", nil)
	if err != nil {
		t.Fatalf("EnqueueOne parent: %v", err)
	}
	child, err := c.EnqueueOne(ctx, "info-child", []byte("child"), client.TaskAfter(parent))
	if err != nil {
		t.Fatalf("EnqueueOne child: %v", err)
	}
	if _, err := c.CompleteClaim(ctx, claimOne(ctx, t, c, "info-parent"), []byte("parent's")); err != nil {
		t.Fatalf("CompleteClaim parent: %v", err)
	}
	want := []client.ParentInfo{{ID: parent, State: client.StateCompleted, Outcome: client.OutcomeCompleted, Result: []byte("parent's")}}
	got, err := c.GetParents(ctx, child)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Client.GetParents: %+v, %v; want %+v", got, err, want)
	}
	if got, err := c.GetParents(ctx, parent); err != nil || len(got) != 0 {
		t.Errorf("GetParents of a task without parents: %+v, %v; want none", got, err)
	}

	wctx, stop := context.WithCancel(ctx)
	var fromTask []client.ParentInfo
	var info *client.TaskInfo
	err = c.Work(wctx, client.WorkerConfig{Queue: "info-child"}, func(ctx context.Context, tk *client.Task) ([]byte, error) {
		defer stop()
		info = tk.Info()
		var err error
		fromTask, err = tk.GetParents(ctx)
		return nil, err
	})
	if err != nil {
		t.Fatalf("Work: %v", err)
	}
	if !reflect.DeepEqual(fromTask, want) {
		t.Errorf("Task.GetParents: %+v; want %+v", fromTask, want)
	}
	if info == nil || info.ID != child || info.State != client.StateRunning || info.Fence == 0 || !reflect.DeepEqual(info.Parents, []string{parent}) {
		t.Errorf("Task.Info: %+v", info)
	}
}
