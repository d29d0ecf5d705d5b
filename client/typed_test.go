package client

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

type resizeArgs struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

type resizeResult struct {
	Thumb string `json:"thumb"`
}

// typedWorker runs a worker of queue "q" on rs with handler h until the
// test ends, and returns its client.
func typedWorker(t *testing.T, rs *realServer, h Handler) *Client {
	t.Helper()
	c := mustClient(t, rs.addr)
	cfg := fastConfig()
	cfg.Lease = 2 * time.Second // the server's least
	startWorker(t, mustWorker(t, c, cfg, h))
	return c
}

// waitDone waits until the task is finished and returns it.
func waitDone(t *testing.T, c *Client, id string) *docketv1.Task {
	t.Helper()
	task, err := c.WaitResult(ctxTimeout(t, 5*time.Second), id)
	if err != nil {
		t.Fatalf("wait result of %s: %v", id, err)
	}
	return task
}

// Test_HandleResult_DecodesArgsAndEncodesResult: EnqueueJSON's payload
// reaches a HandleResult handler as the struct it was made from, and the
// handler's result is stored as JSON on the real server.
func Test_HandleResult_DecodesArgsAndEncodesResult(t *testing.T) {
	rs := startRealServer(t)
	var got atomic.Pointer[resizeArgs]
	c := typedWorker(t, rs, HandleResult(func(_ context.Context, _ *Task, a resizeArgs) (resizeResult, error) {
		got.Store(&a)
		return resizeResult{Thumb: a.Image + "@" + "200"}, nil
	}))
	id, err := c.EnqueueJSON(ctxTimeout(t, time.Second), "q", resizeArgs{Image: "cat.png", Width: 200})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	task := waitDone(t, c, id)
	if task.GetState() != docketv1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("state = %v, want COMPLETED (last error %q)", task.GetState(), task.GetLastError())
	}
	if a := got.Load(); a == nil || *a != (resizeArgs{Image: "cat.png", Width: 200}) {
		t.Fatalf("handler got %+v, want the enqueued args", a)
	}
	var res resizeResult
	if err := json.Unmarshal(task.GetResult(), &res); err != nil || res.Thumb != "cat.png@200" {
		t.Fatalf("result %q (%v), want {\"thumb\":\"cat.png@200\"}", task.GetResult(), err)
	}
}

// Test_Handle_StoresNoResult: Handle's function has no result, and the
// task completes with none (not "{}").
func Test_Handle_StoresNoResult(t *testing.T) {
	rs := startRealServer(t)
	c := typedWorker(t, rs, Handle(func(context.Context, *Task, resizeArgs) error { return nil }))
	id, err := c.EnqueueJSON(ctxTimeout(t, time.Second), "q", resizeArgs{Image: "a"})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	task := waitDone(t, c, id)
	if task.GetState() != docketv1.TaskState_TASK_STATE_COMPLETED || len(task.GetResult()) != 0 {
		t.Fatalf("state %v result %q, want COMPLETED with no result", task.GetState(), task.GetResult())
	}
}

// Test_Handle_BadPayloadIsRetriedThenDead: a payload that is not JSON
// for the handler's type never reaches the handler; each attempt is
// nacked with a cause naming the type, and at its max attempts the task
// is a dead letter whose last error says why.
func Test_Handle_BadPayloadIsRetriedThenDead(t *testing.T) {
	rs := startRealServer(t)
	var called atomic.Int32
	c := typedWorker(t, rs, Handle(func(context.Context, *Task, resizeArgs) error {
		called.Add(1)
		return nil
	}))
	id, err := c.EnqueueOne(ctxTimeout(t, time.Second), "q", []byte(`{"image": 42}`), TaskMaxAttempts(2))
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	task := waitDone(t, c, id)
	if task.GetState() != docketv1.TaskState_TASK_STATE_DEAD || task.GetAttempts() != 2 {
		t.Fatalf("state %v after %d attempts, want DEAD after 2", task.GetState(), task.GetAttempts())
	}
	for _, want := range []string{"payload does not decode as client.resizeArgs", "cannot unmarshal number"} {
		if !strings.Contains(task.GetLastError(), want) {
			t.Fatalf("last error %q does not say %q", task.GetLastError(), want)
		}
	}
	if n := called.Load(); n != 0 {
		t.Fatalf("handler called %d times with an undecodable payload", n)
	}
}

// Test_HandleCodec_BadPayloadError: the adapter's error wraps
// ErrBadPayload and is not permanent, for an empty payload too.
func Test_HandleCodec_BadPayloadError(t *testing.T) {
	h := Handle(func(context.Context, *Task, resizeArgs) error { return nil })
	for _, payload := range []string{"", "not json", `["a"]`} {
		_, err := h(context.Background(), &Task{p: &docketv1.Task{Id: "t1", Payload: []byte(payload)}})
		if !errors.Is(err, ErrBadPayload) || errors.Is(err, ErrPermanent) {
			t.Fatalf("payload %q: err = %v, want ErrBadPayload and not ErrPermanent", payload, err)
		}
	}
}

// Test_HandleResult_UnencodableResultFails: a result the codec cannot
// encode fails the task for good instead of running it again.
func Test_HandleResult_UnencodableResultFails(t *testing.T) {
	rs := startRealServer(t)
	var calls atomic.Int32
	c := typedWorker(t, rs, HandleResult(func(context.Context, *Task, resizeArgs) (func(), error) {
		calls.Add(1)
		return func() {}, nil
	}))
	id, err := c.EnqueueJSON(ctxTimeout(t, time.Second), "q", resizeArgs{Image: "a"})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	task := waitDone(t, c, id)
	if task.GetState() != docketv1.TaskState_TASK_STATE_FAILED || !strings.Contains(task.GetLastError(), "encode the result func()") {
		t.Fatalf("state %v, last error %q; want FAILED naming the result type", task.GetState(), task.GetLastError())
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}
