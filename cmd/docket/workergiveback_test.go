package main

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/dockethq/docket/client"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_WorkerGivesBackWithoutSpendingAnAttempt: a task that a report's
// claim brought in after the worker stopped claiming never runs; the
// worker hands it back. It must come back as it was, claimable at once
// and with no attempt spent, not as a failure: at max attempts 1 a
// failure would dead-letter a task that no handler ever saw.
func Test_WorkerGivesBackWithoutSpendingAnAttempt(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	rode, release := make(chan struct{}), make(chan struct{})
	var rodeOnce sync.Once
	hold := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if b, ok := req.(*pb.SubmitBatchRequest); ok && b.GetClaim() != nil && err == nil {
			// The ride claimed; its answer reaches the worker only once
			// the worker stopped claiming.
			rodeOnce.Do(func() { close(rode) })
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return err
	}
	c := mustClientWith(t, addrsOf(nodes), client.WithDialOptions(grpc.WithChainUnaryInterceptor(hold)))
	ctx := ctxT(t, 60*time.Second)
	ids, err := c.Enqueue(ctx, &pb.NewTask{Queue: "giveback", MaxAttempts: 1}, &pb.NewTask{Queue: "giveback", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	stopping := make(chan struct{})
	logs := slog.New(&onMessage{prefix: "worker stopping", seen: stopping})
	var ran sync.Map
	w, err := client.NewWorker(c, client.WorkerConfig{Queue: "giveback", Concurrency: 1, PollWait: time.Second, Logger: logs},
		func(_ context.Context, tk *client.Task) ([]byte, error) {
			ran.Store(tk.ID(), true)
			return nil, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(ctx, w)
	select {
	case <-rode:
	case <-ctx.Done():
		t.Fatal("no report claimed a task")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case <-stopping:
	case <-ctx.Done():
		t.Fatal("the worker never stopped claiming")
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("worker: %v", err)
	}
	second := ids[1].GetTaskId()
	if _, ok := ran.Load(second); ok {
		t.Fatalf("task %s ran after the worker stopped claiming", second)
	}
	got, err := c.ReadTask(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetState() != pb.TaskState_TASK_STATE_PENDING || got.GetAttempts() != 0 {
		t.Fatalf("the given-back task is %s with %d attempts spent; want PENDING with none", got.GetState(), got.GetAttempts())
	}
}

// onMessage is a slog handler that closes seen at the first record whose
// message starts with prefix, and drops every record.
type onMessage struct {
	prefix string
	seen   chan struct{}
	once   sync.Once
}

func (h *onMessage) Enabled(context.Context, slog.Level) bool { return true }

func (h *onMessage) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}

func (h *onMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *onMessage) WithGroup(string) slog.Handler      { return h }
