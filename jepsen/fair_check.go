package jepsen

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"
)

// keySpan is one claim of the fair queue holding its task: from the
// claim's acknowledgement until the first op that could release it was
// invoked, and at most until its lease could have run out.
type keySpan struct {
	key        string
	task       string
	start, end int64
	claim      Op
}

// fairSince is when FairQueue's per-key rule was first acknowledged, and
// the limit set: -1 when never.
func fairSince(h *History) (since int64, limit int) {
	since = -1
	for _, o := range h.xops(FKeyLimitSet, FairQueue, OK) {
		if since < 0 || o.Complete < since {
			since = o.Complete
			limit, _ = strconv.Atoi(o.Key)
		}
	}
	return since, limit
}

// fairRan reports whether the run had the fair workload (--fair): it
// tried to set the queue at least once.
func fairRan(h *History) bool {
	for _, o := range h.Ops {
		if o.F == FKeyLimitSet {
			return true
		}
	}
	return false
}

// keySpans are the fair queue's held claims invoked from since on, as
// CheckLimits reasons about the limit queue's.
func keySpans(h *History, since int64) []keySpan {
	out := claimSpans(h, FairQueue, since)
	for i := range out {
		out[i].key = fairKeyOf(out[i].claim.Key)
	}
	return out
}

// CheckKeyLimits (per-key-limit): at no time were more than the per-key
// limit's tasks of one key of FairQueue provably running. Spans of one
// key that overlap, more than the limit of them, prove the cluster ran
// more. The run must have counted MinKeyLimitHeld spans and held the
// noisy key at its limit MinKeyLimitFull times, or it did not test the
// limit. A run without the fair workload passes with a note.
func CheckKeyLimits(h *History) Result {
	r := newResult("per-key-limit")
	if !fairRan(h) {
		r.Note = "the fair workload did not run (jepsen --fair)"
		return r
	}
	since, limit := fairSince(h)
	if since < 0 || limit <= 0 {
		r.violate("", "the per-key limit of %s was never acknowledged: the run did not test it", FairQueue)
		return r
	}
	type edge struct {
		t int64
		d int
		s keySpan
	}
	var edges []edge
	for _, s := range keySpans(h, since) {
		r.Checked++
		edges = append(edges, edge{s.start, +1, s}, edge{s.end, -1, s})
	}
	// Ends before starts at one instant: spans that touch do not overlap.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].t != edges[j].t {
			return edges[i].t < edges[j].t
		}
		return edges[i].d < edges[j].d
	})
	held := map[string]map[string]Op{} // key -> task -> claim
	full, peak := 0, 0
	for _, e := range edges {
		k := e.s.key
		if e.d < 0 {
			delete(held[k], e.s.task)
			continue
		}
		if held[k] == nil {
			held[k] = map[string]Op{}
		}
		held[k][e.s.task] = e.s.claim
		n := len(held[k])
		peak = max(peak, n)
		if n == limit && k == fairNoisy {
			full++
		}
		if n > limit {
			var descs []string
			for _, o := range held[k] {
				descs = append(descs, h.desc(o))
			}
			slices.Sort(descs)
			r.violate(e.s.task, "%d tasks of key %q of %s running at %.3fs under a per-key limit of %d: %v", n, k, FairQueue,
				float64(e.t-h.Begin)/1e9, limit, descs)
		}
	}
	r.Note = fmt.Sprintf("per-key limit %d: %d spans, the noisy key at the limit %d times, peak %d", limit, r.Checked, full, peak)
	atLeast(&r, MinKeyLimitHeld, "claims held under the per-key limit")
	if full < MinKeyLimitFull {
		r.violate("", "the noisy key reached the per-key limit %d times, below the minimum of %d: the run did not test it", full, MinKeyLimitFull)
	}
	return r
}

// CheckFairness (fairness): a quiet key's task is not held back by the
// noisy key's backlog. For each quiet task, the window runs from the
// acknowledgement of its enqueue (it was ready by then) to the
// invocation of the claim that first took it; the claims acknowledged
// wholly inside the window were applied while it waited. At most
// FairNoisyBound of them may have taken a noisy task. A window is judged
// only where the history shows every claim of the queue in it (none of
// unknown outcome, which may have taken the task itself) and the quiet
// key held no other task (the bound's premise: the key has none running
// when its task becomes ready). A task whose first claim in the history
// says it was claimed before (Op.Claims above 1) is not judged: the Go
// client resends a Claim whose answer was lost, so a claim the history
// never shows may have taken it, and it came back only when that lease ran
// out. Counting claims, not time, keeps the
// bound free of the faults: a partition delays every claim alike.
func CheckFairness(h *History) Result {
	r := newResult("fairness")
	if !fairRan(h) {
		r.Note = "the fair workload did not run (jepsen --fair)"
		return r
	}
	since, _ := fairSince(h)
	if since < 0 {
		r.violate("", "the fair order of %s was never acknowledged: the run did not test it", FairQueue)
		return r
	}
	ready := map[string]Op{} // task -> its acknowledged enqueue
	for _, o := range h.xops(FXEnqueue, FairQueue, OK) {
		if o.Task != "" && o.Invoke >= since {
			ready[o.Task] = o
		}
	}
	claims := h.xops(FXClaim, FairQueue, "")
	sort.Slice(claims, func(i, j int) bool { return claims[i].Invoke < claims[j].Invoke })
	first := map[string]Op{} // task -> the first acknowledged claim that took it
	for _, c := range claims {
		if c.Type == OK && c.Task != "" {
			if _, ok := first[c.Task]; !ok {
				first[c.Task] = c
			}
		}
	}
	spans := keySpans(h, since)
	skipped, ghosts, worst, sum := 0, 0, 0, 0
	for task, enq := range ready {
		key := fairKeyOf(enq.Key)
		c, ok := first[task]
		if key == fairNoisy || key == "" || !ok {
			continue
		}
		if c.Claims > 1 {
			// A claim the history does not show took it first (the
			// client resent a Claim whose answer was lost): it waited
			// out that claim's lease, not the fair order.
			ghosts++
			continue
		}
		from, to := enq.Complete, c.Invoke
		if to < from {
			// The claim was invoked before the enqueue was acknowledged
			// (a long poll): nothing was applied in between.
			r.Checked++
			continue
		}
		if !fairWindowKnown(claims, spans, task, key, from, to) {
			skipped++
			continue
		}
		noisy := 0
		for _, o := range claims {
			if o.Type == OK && o.Invoke >= from && o.Complete <= to && fairKeyOf(o.Key) == fairNoisy {
				noisy++
			}
		}
		r.Checked++
		worst, sum = max(worst, noisy), sum+noisy
		if noisy > FairNoisyBound {
			r.violate(task, "quiet task %s of key %q waited %.3fs (from %.3fs) while %d claims took the noisy key's tasks, over the bound of %d",
				task, key, float64(to-from)/1e9, float64(from-h.Begin)/1e9, noisy, FairNoisyBound)
		}
	}
	mean := 0.0
	if r.Checked > 0 {
		mean = float64(sum) / float64(r.Checked)
	}
	r.Note = fmt.Sprintf("bound %d noisy claims: %d quiet tasks judged, %d skipped (a claim of unknown outcome, or the key held another task), %d first taken by a claim whose answer was lost, worst %d, mean %.2f",
		FairNoisyBound, r.Checked, skipped, ghosts, worst, mean)
	atLeast(&r, MinFairJudged, "quiet tasks judged")
	return r
}

// fairInfoReach is how long after its invocation a claim of unknown
// outcome is taken to have been applied, if at all: the workload's claim
// timeout. A claim's entry commits within it or, in all but a leaderless
// stretch with the entry on a majority, is dropped; one applied later
// could only cause a false alarm (it took the quiet task, which came back
// after its lease), never hide a violation.
const fairInfoReach = int64(5 * time.Second)

// fairWindowKnown reports whether the window [from, to] of a quiet task
// of key can be judged: no claim of the queue of unknown outcome may have
// been applied in it, and no other task of key was held in it.
func fairWindowKnown(claims []Op, spans []keySpan, task, key string, from, to int64) bool {
	for _, o := range claims {
		if o.Type == Info && o.Invoke <= to && o.Invoke+fairInfoReach >= from {
			return false
		}
	}
	for _, s := range spans {
		if s.key == key && s.task != task && s.start <= to && s.end >= from {
			return false
		}
	}
	return true
}
