package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// rpcCounter counts a client's unary calls by method.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r.mu.Lock()
	r.n[method]++
	r.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (r *rpcCounter) count(methods ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range methods {
		n += r.n[m]
	}
	return n
}

// runWorker runs w until the returned stop is called or ctx ends; stop
// waits for Run to return and returns its error, on every call.
func runWorker(ctx context.Context, w *client.Worker) (stop func() error) {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	return sync.OnceValue(func() error {
		cancel()
		return <-done
	})
}

// Test_WorkerClaimsWithItsReports: a Worker's handler that finishes
// reports its task and claims the worker's next one in the same call, and
// the task runs in the slot it freed, so a backlog is drained with few
// Claims of their own. Every task is completed once, and the worker stops
// cleanly with nothing left running. A queue whose running limit the
// worker's slots fill rides too: the report's own task frees the slot its
// claim takes.
func Test_WorkerClaimsWithItsReports(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	rpcs := &rpcCounter{n: map[string]int{}}
	c := mustClientWith(t, addrsOf(nodes), client.WithDialOptions(grpc.WithChainUnaryInterceptor(rpcs.intercept)))
	for _, limit := range []uint32{0, 4} {
		queue := fmt.Sprintf("ride-%d", limit)
		t.Run(queue, func(t *testing.T) {
			ctx := ctxT(t, 60*time.Second)
			if limit > 0 {
				if _, err := c.SetQueueLimits(ctx, queue, "", client.QueueLimits{MaxRunning: &limit}); err != nil {
					t.Fatal(err)
				}
			}
			before := rpcs.count(pb.Queue_Claim_FullMethodName, pb.Queue_ClaimBatch_FullMethodName)
			drainByWorker(t, ctx, c, queue)
			claims := rpcs.count(pb.Queue_Claim_FullMethodName, pb.Queue_ClaimBatch_FullMethodName) - before
			t.Logf("%d tasks: %d Claim RPCs", rideTasks, claims)
			if claims > rideTasks/10 {
				t.Fatalf("%d Claim RPCs for %d tasks: the reports did not claim the next tasks", claims, rideTasks)
			}
		})
	}
}

const rideTasks = 400

// drainByWorker enqueues rideTasks tasks and runs a Worker of four slots
// until every one completed, each once.
func drainByWorker(t *testing.T, ctx context.Context, c *client.Client, queue string) {
	t.Helper()
	tasks := make([]*pb.NewTask, rideTasks)
	for i := range tasks {
		tasks[i] = &pb.NewTask{Queue: queue}
	}
	if _, err := c.Enqueue(ctx, tasks...); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	var mu sync.Mutex
	seen := map[string]int{}
	w, err := client.NewWorker(c, client.WorkerConfig{Queue: queue, Concurrency: 4, PollWait: time.Second},
		func(_ context.Context, tk *client.Task) ([]byte, error) {
			mu.Lock()
			seen[tk.ID()]++
			mu.Unlock()
			ran.Add(1)
			return nil, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(ctx, w)
	testwait.For(t, 45*time.Second, "every task to complete", func() bool {
		st, err := c.Stats(ctx, queue, "")
		return err == nil && len(st) == 1 && st[0].GetCompleted() == rideTasks
	})
	if err := stop(); err != nil {
		t.Fatalf("worker: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("task %s ran %d times", id, k)
		}
	}
	if ran.Load() != rideTasks {
		t.Fatalf("%d handler runs for %d tasks", ran.Load(), rideTasks)
	}
	st, err := c.Stats(ctx, queue, "")
	if err != nil || len(st) != 1 || st[0].GetRunning() != 0 || st[0].GetPending() != 0 {
		t.Fatalf("after the worker stopped: %v, %v; want nothing running or pending", st, err)
	}
}
