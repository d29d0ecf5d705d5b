package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dockethq/docket/client"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// The queue limit under faults. The workload sets LimitQueue's
// max_running to LimitMax (SetQueueLimits, admin), keeps a small backlog
// in it, and has more workers than the limit claim, hold for less than
// half a lease without heartbeating, and submit. CheckLimits then asks
// the one thing the limit promises: never more than LimitMax of its
// tasks running at once.
const (
	LimitMax      = 2
	limitWorkers  = 4
	limitBacklog  = 8 // the producer keeps at most this many unfinished tasks
	MinLimitHeld  = 20
	MinLimitFull  = 3
	limitSetProc  = "lim-admin"
	limitPauseMin = 50 * time.Millisecond
)

func (w *workload) limits(mainCtx, ctx context.Context) {
	proc := w.cfg.ProcPrefix + "lim"
	if !w.setLimit(ctx, w.cfg.ProcPrefix+limitSetProc) {
		return
	}
	var outstanding atomic.Int64
	var wg sync.WaitGroup
	for i := range limitWorkers {
		wg.Add(1)
		go func() { defer wg.Done(); w.limitWorker(ctx, fmt.Sprintf("%s-w%d", proc, i), &outstanding) }()
	}
	for n := 0; n < 1_000_000 && mainCtx.Err() == nil; n++ {
		if outstanding.Load() < limitBacklog && w.xenqueue(mainCtx, proc, LimitQueue, fmt.Sprintf("%s-%d", proc, n)) != "" {
			outstanding.Add(1)
		}
		time.Sleep(limitPauseMin + rand.N(limitPauseMin))
	}
	wg.Wait()
}

// setLimit sets the limit, retrying while the cluster has not latched the
// limits' level (a rolling upgrade) or has no leader. It reports whether
// the limit is set.
func (w *workload) setLimit(ctx context.Context, proc string) bool {
	maxRunning := uint32(LimitMax)
	for ctx.Err() == nil && !w.draining.Load() {
		op := w.rec.Invoke(Event{Proc: proc, F: FLimitSet, Queue: LimitQueue, Key: strconv.Itoa(LimitMax)})
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := w.acl.SetQueueLimits(c, LimitQueue, Tenant, client.QueueLimits{MaxRunning: &maxRunning})
		cancel()
		if err == nil {
			w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FLimitSet, Queue: LimitQueue, Key: strconv.Itoa(LimitMax)})
			return true
		}
		typ, cls := classify(err)
		w.rec.Record(Event{Proc: proc, Op: op, Type: typ, F: FLimitSet, Queue: LimitQueue, Err: cls})
		time.Sleep(time.Second)
	}
	return false
}

// limitWorker claims, holds for lease/8 to lease/2 (no heartbeat: the
// claim's own lease covers it), and submits; a Submit that rides claims
// the next task itself.
func (w *workload) limitWorker(ctx context.Context, proc string, outstanding *atomic.Int64) {
	x := newXState()
	lease := w.cfg.Lease
	var t *docketv1.Task
	// A task a ride claimed is worked off before the loop may stop.
	for n := 0; n < 1_000_000 && (t != nil || !w.xstop(ctx, x)); n++ {
		if t == nil {
			if t = w.xclaim(ctx, proc, LimitQueue, x); t == nil {
				continue
			}
		}
		time.Sleep(lease/8 + rand.N(lease*3/8))
		typ, next := w.xsubmitNext(ctx, proc, LimitQueue, t, x)
		if typ != Fail {
			outstanding.Add(-1)
		}
		t = next
	}
}

// CheckLimits: at no time were more than the limit's tasks of LimitQueue
// provably running. A claim acknowledged at C holds its task from C until
// the first op that could release it was invoked (a Submit), and at most
// until its lease could have run out: the leader stamped the claim after
// it was invoked, so the lease lasts until at least invoke+lease, less
// the clock tolerance. Only claims invoked after the limit was
// acknowledged count. Where more than the limit of such spans overlap, the
// cluster ran more than the limit. The run must have held tasks at the
// limit MinLimitFull times and counted MinLimitHeld spans, or it did not
// test the limit.
func CheckLimits(h *History) Result {
	r := newResult("queue-limit")
	since, limit := int64(-1), 0
	for _, o := range h.xops(FLimitSet, LimitQueue, OK) {
		if since < 0 || o.Complete < since {
			since = o.Complete
			limit, _ = strconv.Atoi(o.Key)
		}
	}
	if since < 0 || limit <= 0 {
		r.violate("", "the limit of %s was never acknowledged: the run did not test limits", LimitQueue)
		return r
	}
	type edge struct {
		t    int64
		d    int
		task string
		op   Op
	}
	var edges []edge
	for _, s := range claimSpans(h, LimitQueue, since) {
		r.Checked++
		edges = append(edges, edge{s.start, +1, s.task, s.claim}, edge{s.end, -1, s.task, s.claim})
	}
	// Ends before starts at one instant: spans that touch do not overlap.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].t != edges[j].t {
			return edges[i].t < edges[j].t
		}
		return edges[i].d < edges[j].d
	})
	held := map[string]Op{}
	full, peak := 0, 0
	for _, e := range edges {
		if e.d < 0 {
			delete(held, e.task)
			continue
		}
		held[e.task] = e.op
		peak = max(peak, len(held))
		if len(held) == limit {
			full++
		}
		if len(held) > limit {
			var descs []string
			for _, o := range held {
				descs = append(descs, h.desc(o))
			}
			slices.Sort(descs)
			r.violate(e.task, "%d tasks of %s running at %.3fs under a limit of %d: %v", len(held), LimitQueue,
				float64(e.t-h.Begin)/1e9, limit, descs)
		}
	}
	r.Note = fmt.Sprintf("limit %d: %d spans, at the limit %d times, peak %d", limit, r.Checked, full, peak)
	atLeast(&r, MinLimitHeld, "claims held under the limit")
	if full < MinLimitFull {
		r.violate("", "the limit was reached %d times, below the minimum of %d: the run did not test it", full, MinLimitFull)
	}
	return r
}

// claimRef names one claim: a task and the fence it was held under.
type claimRef struct {
	task  string
	fence uint64
}

// releases is, per claim of a task of queue, the earliest invoke of an
// operation that gave it back (a submit, nack or snooze): the latest the
// claim can have held its task.
func releases(h *History, queue string) map[claimRef]int64 {
	release := map[claimRef]int64{}
	for _, o := range h.Ops {
		if o.Queue != queue || (o.F != FXSubmit && o.F != FXNack && o.F != FSnooze) {
			continue
		}
		k := claimRef{o.Task, o.Fence}
		if v, ok := release[k]; !ok || o.Invoke < v {
			release[k] = o.Invoke
		}
	}
	return release
}

// claimSpans are the spans in which the acknowledged claims of queue
// invoked from since on provably held their tasks: from the claim's
// acknowledgement to the earlier of its lease's end (less the clocks'
// tolerance) and the first submit, nack or snooze of the task under its
// fence. A claim whose span is empty is left out. key is not set.
func claimSpans(h *History, queue string, since int64) []keySpan {
	release := releases(h, queue)
	var out []keySpan
	for _, c := range h.xops(FXClaim, queue, OK) {
		if c.Task == "" || c.Invoke < since || c.Lease <= 0 {
			continue
		}
		end := c.Invoke + c.Lease - clockTolerance(h, c.Invoke, c.Invoke+c.Lease)
		if v, ok := release[claimRef{c.Task, c.Fence}]; ok {
			end = min(end, v)
		}
		if end <= c.Complete {
			continue
		}
		out = append(out, keySpan{task: c.Task, start: c.Complete, end: end, claim: c})
	}
	return out
}
