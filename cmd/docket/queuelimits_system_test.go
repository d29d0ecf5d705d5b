//go:build system

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_SystemConcurrencyLimitHolds is the black-box check of
// limits: three agents of the built binary, a queue limited to 3 running
// tasks with `docket queue limit`, and 20 Go Workers (some asking for two
// tasks a claim) working it. No more than 3 handlers ever overlap (each
// handler's own start and end, which lie inside its task's RUNNING time,
// so this undercounts nothing the FSM allowed for longer than a handler
// runs), `docket stats` never shows more than 3 running, and every task
// completes.
func Test_SystemConcurrencyLimitHolds(t *testing.T) {
	const (
		tasks   = 90
		workers = 20
		limit   = 3
		work    = 40 * time.Millisecond
	)
	ac := startAgentCluster(t, fsm.LevelLimits)
	grpcs := ac.grpcs
	cli := func(args ...string) (string, error) { return ac.cli(grpcs, args...) }
	if out, err := cli("queue", "limit", "jobs", "--concurrency", strconv.Itoa(limit)); err != nil || !strings.Contains(out, "concurrency 3") {
		t.Fatalf("docket queue limit: %q %v", out, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := client.New(ctx, grpcs)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	batch := make([]*pb.NewTask, tasks)
	for i := range batch {
		batch[i] = &pb.NewTask{Queue: "jobs", Payload: []byte(strconv.Itoa(i))}
	}
	if _, err := c.Enqueue(ctx, batch...); err != nil {
		t.Fatal(err)
	}

	var active, peak, handled atomic.Int64
	seen := sync.Map{}
	handler := func(ctx context.Context, task *client.Task) ([]byte, error) {
		n := active.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		select { // the task's work, cut short if the worker stops
		case <-time.After(work):
		case <-ctx.Done():
		}
		active.Add(-1)
		if _, dup := seen.LoadOrStore(task.ID(), true); !dup {
			handled.Add(1)
		}
		return nil, nil
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range workers {
		w, err := client.NewWorker(c, client.WorkerConfig{Queue: "jobs", WorkerID: fmt.Sprintf("w%d", i),
			Concurrency: 1 + i%2, PollWait: 2 * time.Second}, handler)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(wctx); err != nil && wctx.Err() == nil {
				t.Errorf("worker %d: %v", i, err)
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()

	// The cluster's own count, sampled while the workers run.
	var maxRunning uint64
	testwait.For(t, 60*time.Second, "every task completed", func() bool {
		out, err := cli("stats", "jobs", "--json")
		var st struct {
			Queues []struct{ Running, Completed string }
		}
		if err != nil || json.Unmarshal([]byte(out), &st) != nil || len(st.Queues) != 1 {
			return false
		}
		r, _ := strconv.ParseUint(st.Queues[0].Running, 10, 64)
		maxRunning = max(maxRunning, r)
		return st.Queues[0].Completed == strconv.Itoa(tasks)
	})
	stop()
	wg.Wait()
	t.Logf("%d tasks by %d workers: at most %d handlers at once, stats at most %d running", handled.Load(), workers, peak.Load(), maxRunning)
	if p := peak.Load(); p > limit {
		t.Fatalf("%d handlers ran at once under a concurrency limit of %d", p, limit)
	}
	if p := peak.Load(); p < 2 {
		t.Fatalf("at most %d handler ran at once: the test did not load the limit", p)
	}
	if maxRunning > limit {
		t.Fatalf("stats showed %d running under a limit of %d", maxRunning, limit)
	}
	if handled.Load() != tasks {
		t.Fatalf("%d distinct tasks handled, want %d", handled.Load(), tasks)
	}
}
