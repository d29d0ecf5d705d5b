package jepsen

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Verdicts.
const (
	Pass    = "pass"
	Violate = "fail"
	Unknown = "unknown"
)

// Result is one checker's verdict. Violations name the task ids and the
// events (process, op, times relative to the history's start) that broke it.
type Result struct {
	Name       string   `json:"name"`
	Verdict    string   `json:"verdict"`
	Checked    int      `json:"checked"` // how many things were checked
	Violations []string `json:"violations,omitempty"`
	Note       string   `json:"note,omitempty"`
	Tasks      []string `json:"tasks,omitempty"` // offending task ids
}

func (r *Result) violate(task, format string, args ...any) {
	r.Verdict = Violate
	if task != "" && !slices.Contains(r.Tasks, task) {
		r.Tasks = append(r.Tasks, task)
	}
	if len(r.Violations) < 50 {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	}
}

func newResult(name string) Result { return Result{Name: name, Verdict: Pass} }

// desc names an op for a violation message.
func (h *History) desc(o Op) string {
	rel := func(t int64) string {
		if t == math.MaxInt64 {
			return "?"
		}
		return fmt.Sprintf("%.3fs", float64(t-h.Begin)/1e9)
	}
	return fmt.Sprintf("%s %s %s(task=%s fence=%d) [%s..%s]", o.Proc, o.Type, o.F, o.Task, o.Fence, rel(o.Invoke), rel(o.Complete))
}

func (h *History) ops(f, typ string) []Op {
	var out []Op
	for _, o := range h.Ops {
		if o.F == f && (typ == "" || o.Type == typ) {
			out = append(out, o)
		}
	}
	return out
}

// CheckLost: every acknowledged enqueue was delivered by some claim.
func CheckLost(h *History) Result {
	r := newResult("lost")
	claimed := map[string]bool{}
	for _, c := range h.ops(FClaim, OK) {
		if c.Task != "" {
			claimed[c.Task] = true
		}
	}
	for _, e := range h.ops(FEnqueue, OK) {
		r.Checked++
		if !claimed[e.Task] {
			r.violate(e.Task, "acknowledged enqueue never delivered: %s key=%s", h.desc(e), e.Key)
		}
	}
	if h.DrainAt == 0 && len(h.Ops) > 0 {
		r.Note = "no drain phase recorded"
	}
	if h.DrainNote != "" {
		r.Note = h.DrainNote + ": undelivered tasks may only be late"
	}
	return r
}

// CheckUnexpected: every delivered task came from an enqueue we invoked, and
// one idempotency key never yields two tasks.
func CheckUnexpected(h *History) Result {
	r := newResult("unexpected")
	invoked := map[string]bool{}
	acked := map[string]string{} // key -> task id
	for _, e := range h.ops(FEnqueue, "") {
		invoked[e.Key] = true
		if e.Type == OK {
			if prev, ok := acked[e.Key]; ok && prev != e.Task {
				r.violate(e.Task, "key %s acknowledged as two tasks %s and %s", e.Key, prev, e.Task)
			}
			acked[e.Key] = e.Task
		}
	}
	byKey := map[string]string{}
	for _, c := range h.ops(FClaim, OK) {
		if c.Task == "" {
			continue
		}
		r.Checked++
		if !invoked[c.Key] {
			r.violate(c.Task, "claimed a task never enqueued: %s key=%q", h.desc(c), c.Key)
			continue
		}
		if id, ok := acked[c.Key]; ok && id != c.Task {
			r.violate(c.Task, "key %s was acknowledged as task %s but delivered as %s: %s", c.Key, id, c.Task, h.desc(c))
		}
		if id, ok := byKey[c.Key]; ok && id != c.Task {
			r.violate(c.Task, "key %s delivered as two tasks %s and %s", c.Key, id, c.Task)
		}
		byKey[c.Key] = c.Task
	}
	return r
}

// CheckDoubleSubmit: a task's accepted Submits all carry one fence, and
// at most one of them is a first acceptance. "Already done" answers count
// as accepted: the client reports a retry of its own applied attempt so.
func CheckDoubleSubmit(h *History) Result {
	r := newResult("double-completion")
	first := map[string]Op{}
	fresh := map[string]Op{}
	for _, s := range h.ops(FSubmit, OK) {
		r.Checked++
		if p, ok := first[s.Task]; ok && p.Fence != s.Fence {
			r.violate(s.Task, "task %s accepted Submits under two fences: %s and %s", s.Task, h.desc(p), h.desc(s))
		} else if !ok {
			first[s.Task] = s
		}
		if s.Done {
			continue
		}
		if p, ok := fresh[s.Task]; ok {
			r.violate(s.Task, "task %s accepted two Submits as new: %s and %s", s.Task, h.desc(p), h.desc(s))
		}
		fresh[s.Task] = s
	}
	return r
}

func claimsByTask(h *History) map[string][]Op {
	m := map[string][]Op{}
	for _, c := range h.ops(FClaim, OK) {
		if c.Task != "" {
			m[c.Task] = append(m[c.Task], c)
		}
	}
	return m
}

// CheckStaleAccepted: no Submit, Heartbeat or Nack was accepted under a
// fence older than one granted (a claim that completed) before it was
// invoked; and the downstream register never accepted a write below a fence
// it had accepted before.
func CheckStaleAccepted(h *History) Result {
	r := newResult("stale-accepted")
	claims := claimsByTask(h)
	for _, o := range h.Ops {
		if o.Type != OK || (o.F != FSubmit && o.F != FHeartbeat && o.F != FNack) || o.Done {
			continue
		}
		r.Checked++
		for _, c := range claims[o.Task] {
			if c.Fence > o.Fence && c.Complete < o.Invoke {
				r.violate(o.Task, "%s accepted with fence %d after %s granted fence %d", h.desc(o), o.Fence, h.desc(c), c.Fence)
				break
			}
		}
	}
	top := map[string]Op{}
	for _, w := range h.ops(FWrite, OK) {
		r.Checked++
		if p, ok := top[w.Task]; ok && w.Fence < p.Fence {
			r.violate(w.Task, "downstream accepted %s below earlier %s", h.desc(w), h.desc(p))
		}
		if w.Fence >= top[w.Task].Fence {
			top[w.Task] = w
		}
	}
	return r
}

// CheckFences: a task's fences strictly increase in claim order: a claim
// that completed before another was invoked has the smaller fence, and no
// two claims share one.
func CheckFences(h *History) Result {
	r := newResult("fences")
	for task, cs := range claimsByTask(h) {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Invoke < cs[j].Invoke })
		for i, a := range cs {
			r.Checked++
			for _, b := range cs[i+1:] {
				if a.Fence == b.Fence {
					r.violate(task, "two claims got fence %d: %s and %s", a.Fence, h.desc(a), h.desc(b))
				} else if a.Complete < b.Invoke && a.Fence > b.Fence {
					r.violate(task, "fence went backwards: %s then %s", h.desc(a), h.desc(b))
				}
			}
		}
	}
	return r
}

// LeaseSlack is the margin the lease checker allows for a heartbeat's
// round trip and for the time between a leader stamping and applying.
const LeaseSlack = 300 * time.Millisecond

// CheckLeaseLost: a worker whose last heartbeat (or claim) was accepted, and
// who heard "stale fence" well before that lease could have run out, lost
// its lease while heartbeating on time. Time on the leader advances at
// least as fast as ours, so a lease granted by an op invoked at P lasts
// until at least P+lease in our time line unless a node's clock is skewed.
func CheckLeaseLost(h *History) Result {
	r := newResult("lease-lost-while-heartbeating")
	type key struct {
		proc, task string
		fence      uint64
	}
	last := map[key]Op{}
	sorted := slices.Clone(h.Ops)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Invoke < sorted[j].Invoke })
	for _, o := range sorted {
		k := key{o.Proc, o.Task, o.Fence}
		switch {
		case o.F == FClaim && o.Type == OK && o.Task != "":
			last[k] = o
		case o.F == FHeartbeat && o.Type == OK:
			r.Checked++
			last[k] = o
		case o.F == FHeartbeat && o.Type == Fail && o.Err == ErrStale:
			r.Checked++
			p, ok := last[k]
			if !ok || p.Lease <= 0 {
				continue
			}
			deadline := p.Invoke + p.Lease - int64(LeaseSlack)
			if o.Complete < deadline {
				r.violate(o.Task, "lease lost %.3fs before it could expire: %s after %s (lease %s)",
					float64(deadline-o.Complete)/1e9, h.desc(o), h.desc(p), time.Duration(p.Lease))
			}
		}
	}
	return r
}

// CheckSplitBrain: once every node has applied the same index, their
// keyspace hashes agree; and after the final heal they do reach one index.
func CheckSplitBrain(h *History) Result {
	r := newResult("split-brain")
	if len(h.Final) == 0 {
		r.Verdict, r.Note = Unknown, "no final node statuses in the history"
		return r
	}
	byIndex := map[uint64]map[string][]string{}
	for _, n := range h.Final {
		if n.Err != "" {
			r.violate("", "node %s did not answer the final status after the heal: %s", n.ID, n.Err)
			continue
		}
		r.Checked++
		if byIndex[n.Applied] == nil {
			byIndex[n.Applied] = map[string][]string{}
		}
		byIndex[n.Applied][n.Hash] = append(byIndex[n.Applied][n.Hash], n.ID)
	}
	for idx, hashes := range byIndex {
		if len(hashes) > 1 {
			r.violate("", "nodes at applied index %d disagree: %v", idx, hashes)
		}
	}
	if len(byIndex) > 1 {
		// Every node is up and connected after the final heal; one that
		// cannot catch up within the workload's minute of polling is a
		// replication failure, not bad luck.
		r.violate("", "applied indexes did not converge after the heal: %v", h.Final)
	}
	return r
}

// MaxRecovery is how long after a heal writes may take to succeed again.
const MaxRecovery = 30 * time.Second

// Recovery is the time from one heal to the next acknowledged enqueue.
type Recovery struct {
	Fault string  `json:"fault"`
	Heal  float64 `json:"heal_s"` // seconds since the history began
	Secs  float64 `json:"recovery_s"`
}

// CheckRecovery measures, for each healed fault, the time until the first
// enqueue acknowledged after the heal.
func CheckRecovery(h *History) (Result, []Recovery) {
	r := newResult("recovery")
	enq := h.ops(FEnqueue, OK)
	sort.Slice(enq, func(i, j int) bool { return enq[i].Complete < enq[j].Complete })
	var recs []Recovery
	worst := 0.0
	for _, f := range h.Faults {
		if f.End == math.MaxInt64 {
			continue
		}
		i := sort.Search(len(enq), func(i int) bool { return enq[i].Complete >= f.End })
		if i == len(enq) {
			if h.DrainAt == 0 || f.End < h.DrainAt-int64(MaxRecovery) {
				r.violate("", "no enqueue acknowledged after %s healed at %.3fs", f.Name, float64(f.End-h.Begin)/1e9)
			}
			continue
		}
		r.Checked++
		s := float64(enq[i].Complete-f.End) / 1e9
		recs = append(recs, Recovery{Fault: f.Name, Heal: float64(f.End-h.Begin) / 1e9, Secs: s})
		worst = max(worst, s)
		if s > MaxRecovery.Seconds() {
			r.violate("", "writes took %.1fs to recover after %s healed at %.3fs", s, f.Name, float64(f.End-h.Begin)/1e9)
		}
	}
	r.Note = fmt.Sprintf("worst %.3fs", worst)
	return r, recs
}

// MaxUnavailable is the longest time the workload may go without an
// acknowledged enqueue while the faults leave a majority healthy (they
// always do): a new leader within a second or two, plus one client call
// deadline (5 s) spent on a node that stopped answering.
const MaxUnavailable = 10 * time.Second

// CheckAvailability finds the longest stretches without an acknowledged
// enqueue before the drain and names the faults active during them.
func CheckAvailability(h *History) Result {
	r := newResult("availability")
	enq := h.ops(FEnqueue, OK)
	sort.Slice(enq, func(i, j int) bool { return enq[i].Complete < enq[j].Complete })
	worst := int64(0)
	for i := 1; i < len(enq); i++ {
		a, b := enq[i-1].Complete, enq[i].Complete
		if h.DrainAt != 0 && b > h.DrainAt {
			break
		}
		r.Checked++
		worst = max(worst, b-a)
		if b-a <= int64(MaxUnavailable) {
			continue
		}
		var active []string
		for _, f := range h.Faults {
			if f.Start < b && f.End > a {
				active = append(active, fmt.Sprintf("%s%v", f.Name, f.Nodes))
			}
		}
		r.violate("", "no enqueue acknowledged for %.3fs (%.3fs..%.3fs) during %v", float64(b-a)/1e9,
			float64(a-h.Begin)/1e9, float64(b-h.Begin)/1e9, active)
	}
	r.Note = fmt.Sprintf("longest gap %.3fs (limit %s)", float64(worst)/1e9, MaxUnavailable)
	return r
}

// CheckFindings fails the run for every fault window whose heal found the
// cluster short of a promise (ErrFinding): a node that left and rejoined
// empty but was not a voter again within the deadline, a voter count that
// dropped during a plain rolling restart, a feature level that latched too
// early or not at all in a rolling upgrade.
func CheckFindings(h *History) Result {
	r := newResult("nemesis-findings")
	for _, f := range h.Faults {
		if f.End == math.MaxInt64 {
			continue
		}
		r.Checked++
		if f.Finding != "" {
			r.violate("", "%s (window %d, healed at %.3fs): %s", f.Name, f.Win, float64(f.End-h.Begin)/1e9, f.Finding)
		}
	}
	return r
}

// CheckAll runs every checker, the porcupine model included.
func CheckAll(h *History) ([]Result, []Recovery) {
	rec, recs := CheckRecovery(h)
	return []Result{
		CheckLost(h), CheckUnexpected(h), CheckDoubleSubmit(h), CheckStaleAccepted(h),
		CheckFences(h), CheckLeaseLost(h), CheckSplitBrain(h), rec, CheckAvailability(h), CheckLinearizable(h, 30*time.Second), CheckReads(h),
		CheckFindings(h), CheckCronOncePerSlot(h), CheckDepsOrder(h), CheckCompleted(h), CheckIdempotentRetry(h),
		CheckLimits(h), CheckRetries(h), CheckSnooze(h), CheckCancel(h), CheckTimeouts(h),
		CheckKeyLimits(h), CheckFairness(h), // fair_check.go; they pass with a note when --fair is off
	}, recs
}

// Failed reports whether any verdict is a violation.
func Failed(rs []Result) bool {
	for _, r := range rs {
		if r.Verdict == Violate {
			return true
		}
	}
	return false
}
