package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dockethq/docket/client"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// The fair queue under faults (feature level 16; opt-in with --fair, as a
// cluster below the level has no such queue). The workload makes
// FairQueue keyed, at most FairKeyMax running per key, in fair order
// (SetQueueLimits, admin), keeps a backlog of one noisy key and one task
// at a time for each of a few quiet keys, and has fairWorkers workers
// claim one task at a time, hold it for less than half a lease without
// heartbeating, and submit. Two checkers read the history:
//
//   - per-key-limit (CheckKeyLimits): never more than FairKeyMax tasks of
//     one key provably running at once, by the queue-limit checker's
//     reasoning from claim, submit and lease times;
//   - fairness (CheckFairness): between the acknowledgement of a quiet
//     task's enqueue and the invocation of the claim that took it, at
//     most FairNoisyBound acknowledged claims took a noisy task, however
//     long the noisy backlog (jepsen/DESIGN.md says why the bound holds).
//
// A task's key is written into its idempotency key, which is its payload
// and so the Key of its enqueue and claim ops: "<prefix>fair.<key>.<n>".
const (
	FairQueue      = "jepsen-fair"
	FairKeyMax     = 2
	FairNoisyBound = 2
	FKeyLimitSet   = "key-limit-set"
	fairWorkers    = 8
	fairQuietKeys  = 4
	fairNoisy      = "noisy"
	// fairNoisyBacklog is the noisy key's unfinished tasks the producer
	// keeps: a backlog every claim sees, small enough to drain.
	fairNoisyBacklog = 30
	fairSetProc      = "fair-admin"
	fairPause        = 40 * time.Millisecond
	// The minimum counts a run must reach, or it did not test fairness.
	MinKeyLimitHeld = 20
	MinKeyLimitFull = 3
	MinFairJudged   = 10
)

// fairIdem is the idempotency key (and payload) of a fair task of key.
func fairIdem(prefix, key string, n int) string { return fmt.Sprintf("%sfair.%s.%d", prefix, key, n) }

// fairKeyOf is the task key written into an idempotency key by fairIdem;
// "" for a key of another workload.
func fairKeyOf(idem string) string {
	_, rest, ok := strings.Cut(idem, "fair.")
	if !ok {
		return ""
	}
	key, _, _ := strings.Cut(rest, ".")
	return key
}

// fair runs the fair-queue loop when the run asked for it.
func (w *workload) fair(mainCtx, ctx context.Context) {
	if !w.cfg.Fair {
		return
	}
	proc := w.cfg.ProcPrefix + "fair"
	if !w.setFair(ctx, w.cfg.ProcPrefix+fairSetProc) {
		return
	}
	// outstanding counts each key's tasks enqueued and not yet submitted.
	outstanding := map[string]*atomic.Int64{fairNoisy: {}}
	quiet := make([]string, fairQuietKeys)
	for i := range quiet {
		quiet[i] = "quiet" + strconv.Itoa(i)
		outstanding[quiet[i]] = &atomic.Int64{}
	}
	var wg sync.WaitGroup
	for i := range fairWorkers {
		wg.Add(1)
		go func() { defer wg.Done(); w.fairWorker(ctx, fmt.Sprintf("%s-w%d", proc, i), outstanding) }()
	}
	for n := 0; n < 1_000_000 && mainCtx.Err() == nil; n++ {
		if outstanding[fairNoisy].Load() < fairNoisyBacklog &&
			w.xenqueue(mainCtx, proc, FairQueue, fairIdem(w.cfg.ProcPrefix, fairNoisy, n), client.TaskKey(fairNoisy)) != "" {
			outstanding[fairNoisy].Add(1)
		}
		// A quiet key has one task at a time: the next is enqueued only
		// after the last one's Submit was acknowledged, so the key has
		// none running when it becomes ready (the bound's premise).
		if q := quiet[n%len(quiet)]; n%5 == 0 && outstanding[q].Load() == 0 &&
			w.xenqueue(mainCtx, proc, FairQueue, fairIdem(w.cfg.ProcPrefix, q, n), client.TaskKey(q)) != "" {
			outstanding[q].Add(1)
		}
		time.Sleep(fairPause + rand.N(fairPause))
	}
	wg.Wait()
}

// setFair makes FairQueue keyed and fair, retrying while the cluster has
// not latched level 16 (a rolling upgrade) or has no leader. It reports
// whether the queue is set.
func (w *workload) setFair(ctx context.Context, proc string) bool {
	perKey, fair := uint32(FairKeyMax), client.OrderFair
	for ctx.Err() == nil && !w.draining.Load() {
		op := w.rec.Invoke(Event{Proc: proc, F: FKeyLimitSet, Queue: FairQueue, Key: strconv.Itoa(FairKeyMax)})
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := w.acl.SetQueueLimits(c, FairQueue, Tenant, client.QueueLimits{MaxRunningPerKey: &perKey, Order: &fair})
		cancel()
		if err == nil {
			w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FKeyLimitSet, Queue: FairQueue, Key: strconv.Itoa(FairKeyMax)})
			return true
		}
		typ, cls := classify(err)
		w.rec.Record(Event{Proc: proc, Op: op, Type: typ, F: FKeyLimitSet, Queue: FairQueue, Err: cls})
		time.Sleep(time.Second)
	}
	return false
}

// fairWorker claims one task at a time, holds it for lease/8 to lease/2
// (no heartbeat: the claim's own lease covers it), and submits; a Submit
// that rides claims the next task itself.
func (w *workload) fairWorker(ctx context.Context, proc string, outstanding map[string]*atomic.Int64) {
	x := newXState()
	lease := w.cfg.Lease
	var t *docketv1.Task
	// A task a ride claimed is worked off before the loop may stop.
	for n := 0; n < 1_000_000 && (t != nil || !w.xstop(ctx, x)); n++ {
		if t == nil {
			if t = w.xclaim(ctx, proc, FairQueue, x); t == nil {
				continue
			}
		}
		time.Sleep(lease/8 + rand.N(lease*3/8))
		// An unknown outcome counts as done, so a quiet key is not stuck
		// on a Submit that applied; if it did not, the key has two tasks
		// for a while, and the fairness checker skips the windows where a
		// quiet key had another task held.
		typ, next := w.xsubmitNext(ctx, proc, FairQueue, t, x)
		if typ != Fail {
			if o := outstanding[fairKeyOf(string(t.GetPayload()))]; o != nil && o.Add(-1) < 0 {
				o.Store(0)
			}
		}
		t = next
	}
}
