//go:build system

package main

import (
	"context"
	"fmt"
	"slices"
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

// The fair queue's promise, black-box: three agents of the built binary,
// one noisy key's 20,000 tasks enqueued, then 20 quiet keys' 10 each, and
// four workers claiming one task at a time, each taking 5 ms. Under
// `--order fair` every quiet task is claimed before the 400th noisy one
// (21 active keys: about 21 claims a round, one of them noisy); under
// `--order fifo` the same quiet tasks wait behind most of the backlog.
// Both runs print each class's dwell time (enqueue acknowledged to claim
// answered), p50 and p99. The fifo run works off the whole backlog: about
// 90 s on two cores without the race detector.
const (
	fairNoisyTasks    = 20_000
	fairQuietKeys     = 20
	fairQuietPerKey   = 10
	fairWorkers       = 4
	fairWork          = 5 * time.Millisecond
	fairNoisyMaxClaim = 400
)

func Test_System_FairQueueQuietKeysNotBehindBacklog(t *testing.T) {
	ac := startAgentCluster(t, fsm.LevelFairQueues)
	for _, order := range []string{"fair", "fifo"} {
		t.Run(order, func(t *testing.T) {
			queue := "exports-" + order
			// fifo is a new queue's order already: the answer may be "unchanged".
			if out, err := ac.cli(ac.grpcs, "queue", "limit", queue, "--order", order); err != nil ||
				!strings.Contains(out, "order "+order) && !strings.Contains(out, "unchanged") {
				t.Fatalf("docket queue limit --order %s: %q %v", order, out, err)
			}
			run := runFairLoad(t, ac.grpcs, queue, order == "fair")
			quiet, noisy := run.dwells(false), run.dwells(true)
			t.Logf("order %s: quiet dwell p50 %v p99 %v (%d tasks); noisy dwell p50 %v p99 %v (%d of %d claimed); noisy claims before the last quiet claim: %d, before the first: %d",
				order, pct(quiet, 50), pct(quiet, 99), len(quiet), pct(noisy, 50), pct(noisy, 99), len(noisy), fairNoisyTasks,
				run.noisyBeforeLastQuiet, run.noisyBeforeFirstQuiet)
			if order == "fair" && run.noisyBeforeLastQuiet >= fairNoisyMaxClaim {
				t.Fatalf("under the fair order %d noisy tasks were claimed before the last quiet one, want fewer than %d",
					run.noisyBeforeLastQuiet, fairNoisyMaxClaim)
			}
			if order == "fifo" && run.noisyBeforeFirstQuiet < fairNoisyTasks*9/10 {
				t.Fatalf("under fifo only %d noisy tasks were claimed before the first quiet one, want most of %d",
					run.noisyBeforeFirstQuiet, fairNoisyTasks)
			}
		})
	}
}

// fairRun is what one load saw: each task's class and times, and the
// noisy claims counted when the first and the last quiet task was claimed.
type fairRun struct {
	mu       sync.Mutex
	ready    map[string]time.Time // enqueue acknowledged
	claimed  map[string]time.Time // claim answered
	noisy    map[string]bool
	noisyN   int // noisy tasks claimed so far
	quietN   int // quiet tasks claimed so far
	quietAll int

	noisyBeforeFirstQuiet, noisyBeforeLastQuiet int
}

// runFairLoad enqueues the load on queue, then runs the workers until
// every quiet task was claimed (under fifo, through the backlog; under
// fair, the noisy backlog is left where it is).
func runFairLoad(t *testing.T, addrs []string, queue string, fair bool) *fairRun {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := mustClient(t, addrs...)
	r := &fairRun{ready: map[string]time.Time{}, claimed: map[string]time.Time{}, noisy: map[string]bool{},
		quietAll: fairQuietKeys * fairQuietPerKey}
	enqueue := func(tasks []*pb.NewTask, noisy bool) {
		for len(tasks) > 0 {
			n := min(len(tasks), pb.MaxBatch)
			items, err := c.Enqueue(ctx, tasks[:n]...)
			if err != nil {
				t.Fatalf("enqueue: %v", err)
			}
			at := time.Now()
			r.mu.Lock()
			for _, it := range items {
				if it.GetCode() != pb.Code_CODE_OK {
					t.Fatalf("enqueue item: %v", it)
				}
				r.ready[it.GetTaskId()], r.noisy[it.GetTaskId()] = at, noisy
			}
			r.mu.Unlock()
			tasks = tasks[n:]
		}
	}
	var batch []*pb.NewTask
	for i := range fairNoisyTasks {
		batch = append(batch, &pb.NewTask{Queue: queue, Key: []byte("noisy"), Payload: fmt.Appendf(nil, "n%d", i)})
	}
	enqueue(batch, true)
	batch = batch[:0]
	for k := range fairQuietKeys {
		for i := range fairQuietPerKey {
			batch = append(batch, &pb.NewTask{Queue: queue, Key: fmt.Appendf(nil, "quiet-%02d", k), Payload: fmt.Appendf(nil, "q%d.%d", k, i)})
		}
	}
	enqueue(batch, false)

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var errs atomic.Int64
	for i := range fairWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				tasks, err := c.ClaimTasks(wctx, queue, client.ClaimMax(1), client.ClaimLease(time.Minute),
					client.ClaimWait(time.Second), client.ClaimWorkerID(fmt.Sprintf("w%d", i)))
				if err != nil {
					if wctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				for _, tk := range tasks {
					r.saw(tk.ID)
					select { // the task's work, cut short when the test ends
					case <-time.After(fairWork):
					case <-wctx.Done():
					}
					if _, err := c.CompleteClaim(wctx, tk, nil); err != nil && wctx.Err() == nil {
						errs.Add(1)
					}
				}
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	testwait.For(t, 14*time.Minute, "every quiet task claimed", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.quietN == r.quietAll
	})
	stop()
	wg.Wait()
	if n := errs.Load(); n > 0 {
		t.Logf("%d claim or submit calls failed (retried)", n)
	}
	return r
}

// saw records the claim of task id, in the order claims answered.
func (r *fairRun) saw(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, again := r.claimed[id]; again {
		return
	}
	r.claimed[id] = time.Now()
	if r.noisy[id] {
		r.noisyN++
		return
	}
	if r.quietN == 0 {
		r.noisyBeforeFirstQuiet = r.noisyN
	}
	r.quietN++
	if r.quietN == r.quietAll {
		r.noisyBeforeLastQuiet = r.noisyN
	}
}

// dwells are the claimed tasks' times from enqueue to claim, of the noisy
// class or the quiet one, sorted.
func (r *fairRun) dwells(noisy bool) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for id, at := range r.claimed {
		if r.noisy[id] == noisy {
			out = append(out, at.Sub(r.ready[id]))
		}
	}
	slices.Sort(out)
	return out
}

// pct is the p-th percentile of sorted ds, rounded to the millisecond.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, len(ds)*p/100)].Round(time.Millisecond)
}
