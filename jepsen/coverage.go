package jepsen

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Coverage is what a run must have done for its verdict to mean anything:
// each named fault held at least MinWindows times, each operation type
// succeeded at least MinOps times, and operations were acknowledged while
// faults held. A run that falls short fails, as does one in which a fault
// failed to apply.
type Coverage struct {
	Faults     []string       `json:"faults"`
	MinWindows int            `json:"min_windows"`
	MinOps     map[string]int `json:"min_ops"` // per operation (Event.F), ok completions
	// MinOpsInFaults: acknowledged operations invoked and completed inside
	// fault windows, in total; and at least one inside some window of each
	// named fault.
	MinOpsInFaults int `json:"min_ops_in_faults"`
	// Once are faults that must hold at least once whatever MinWindows
	// says: the rolling upgrade, which can happen only once in a run.
	Once []string `json:"once,omitempty"`
}

// Coverage minimums. SmokeMinWindows is 1: a smoke scenario of ~80 s sees
// each of its faults once or twice. LongMinWindows is 5: a 15-minute run of
// all twelve faults, two at a time, held 64 windows (RESULTS.md), so 30
// minutes hold about 10 per fault and 5 leaves room for the shuffle while
// still requiring that each fault came back; a shorter run asks for one per
// 6 minutes (jepsen run --min-windows).
const (
	SmokeMinWindows = 1
	LongMinWindows  = 5
)

// DefaultCoverage is the requirement for faults with minWindows per fault.
// The op minimums are far below what a healthy 80 s smoke does (hundreds of
// each) and far above what a workload that stalled early does.
func DefaultCoverage(faults []string, minWindows int) Coverage {
	return Coverage{Faults: faults, MinWindows: minWindows, MinOpsInFaults: 20,
		MinOps: map[string]int{FEnqueue: 100, FClaim: 100, FSubmit: 100, FHeartbeat: 20, FWrite: 100, FRead: 100}}
}

// FaultStat counts one fault's windows in a run.
type FaultStat struct {
	Name     string   `json:"name"`
	Windows  int      `json:"windows"` // applied and healed
	HeldS    float64  `json:"held_s"`  // total time held
	Failed   int      `json:"failed"`  // applications that failed
	OpsInWin int      `json:"ops_in_windows"`
	Outcomes []string `json:"outcomes,omitempty"` // corruption: what became of the node
	Want     int      `json:"want,omitempty"`     // windows the coverage requires
	// Damaged counts corruption windows by the kind of file damaged and
	// whether the node ran ("blob while running", "sst at rest"), so a
	// run shows how often it hit each file of the default store.
	Damaged map[string]int `json:"damaged,omitempty"`
}

// damagedKind reads the kind and the when of a corruption window's detail
// ("n2: wal-segment raft-wal/… (sealed) while running, 8 bytes …"), or ""
// for another fault's.
func damagedKind(detail string) string {
	_, rest, ok := strings.Cut(detail, ": ")
	if !ok {
		return ""
	}
	kind, _, _ := strings.Cut(rest, " ")
	when := "at rest"
	if head, _, _ := strings.Cut(rest, ","); strings.HasSuffix(head, " while running") {
		when = "while running"
	}
	return kind + " " + when
}

// faultStats counts windows per fault, named faults first, in order.
func faultStats(h *History, named []string) []FaultStat {
	idx := map[string]int{}
	var out []FaultStat
	get := func(n string) *FaultStat {
		i, ok := idx[n]
		if !ok {
			i = len(out)
			idx[n] = i
			out = append(out, FaultStat{Name: n})
		}
		return &out[i]
	}
	for _, n := range named {
		get(n)
	}
	acked := ackedOps(h)
	for _, f := range h.Faults {
		if f.Name == "final-heal" || f.End == math.MaxInt64 {
			continue
		}
		s := get(f.Name)
		s.Windows++
		s.HeldS += float64(f.End-f.Start) / 1e9
		if f.Outcome != "" {
			s.Outcomes = append(s.Outcomes, f.Outcome)
		}
		if f.Name == FaultCorrupt && f.Detail != "" {
			if s.Damaged == nil {
				s.Damaged = map[string]int{}
			}
			s.Damaged[damagedKind(f.Detail)]++
		}
		for _, o := range acked {
			if o.Invoke >= f.Start && o.Complete <= f.End {
				s.OpsInWin++
			}
		}
	}
	for _, e := range h.FaultErrors {
		get(e.Name).Failed++
	}
	return out
}

// ackedOps are the acknowledged writes: what shows the cluster worked.
func ackedOps(h *History) []Op {
	var out []Op
	for _, o := range h.Ops {
		if o.Type == OK && (o.F == FEnqueue || o.F == FSubmit || (o.F == FClaim && o.Task != "")) {
			out = append(out, o)
		}
	}
	return out
}

// CheckCoverage fails a run whose faults did not happen, failed to apply,
// or whose workload did too little to test anything.
func CheckCoverage(h *History, cov Coverage) Result {
	r := newResult("coverage")
	for _, e := range h.FaultErrors {
		r.violate("", "fault %s failed to apply at %.3fs: %s", e.Name, float64(e.T-h.Begin)/1e9, e.Err)
	}
	stats := faultStats(h, append(append([]string(nil), cov.Faults...), cov.Once...))
	inFaults := 0
	for _, s := range stats {
		inFaults += s.OpsInWin
	}
	for _, name := range cov.Faults {
		r.Checked++
		var s FaultStat
		for _, x := range stats {
			if x.Name == name {
				s = x
			}
		}
		if s.Windows < cov.MinWindows {
			r.violate("", "fault %s held %d times, want at least %d", name, s.Windows, cov.MinWindows)
		}
		if s.Windows > 0 && s.OpsInWin == 0 && cov.MinOpsInFaults > 0 {
			r.violate("", "fault %s: no operation acknowledged inside any of its %d windows", name, s.Windows)
		}
	}
	for _, name := range cov.Once {
		r.Checked++
		n := 0
		for _, x := range stats {
			if x.Name == name {
				n = x.Windows
			}
		}
		if n < 1 {
			r.violate("", "fault %s never held, want it once", name)
		}
	}
	if inFaults < cov.MinOpsInFaults {
		r.violate("", "%d operations acknowledged inside fault windows, want at least %d", inFaults, cov.MinOpsInFaults)
	}
	fs := make([]string, 0, len(cov.MinOps))
	for f := range cov.MinOps {
		fs = append(fs, f)
	}
	sort.Strings(fs)
	var counts []string
	for _, f := range fs {
		r.Checked++
		n := 0
		for _, o := range h.Ops {
			if o.F == f && o.Type == OK && (f != FClaim || o.Task != "") {
				n++
			}
		}
		counts = append(counts, fmt.Sprintf("%s %d", f, n))
		if n < cov.MinOps[f] {
			r.violate("", "%d acknowledged %s operations, want at least %d", n, f, cov.MinOps[f])
		}
	}
	r.Note = fmt.Sprintf("ok ops: %s; %d acknowledged inside fault windows", strings.Join(counts, ", "), inFaults)
	return r
}

// Absent is a read's answer when the task was not found.
const Absent = "absent"

// CheckReads: no node ever serves a read that differs from the majority's
// at the same applied index. Stale reads of one task that several nodes
// answered at one applied index are compared; every node whose answer
// differs from the most common one (or all of them, on a tie) is named.
// A NotFound answer carries its applied index too (Absent).
func CheckReads(h *History) Result {
	r := newResult("replica-reads")
	type key struct {
		task    string
		applied uint64
	}
	groups := map[key]map[string]map[string]bool{} // -> answer -> nodes
	var keys []key
	for _, o := range h.Ops {
		if o.F != FRead || o.Type != OK || o.Applied == 0 {
			continue
		}
		k := key{o.Task, o.Applied}
		g, ok := groups[k]
		if !ok {
			g = map[string]map[string]bool{}
			groups[k] = g
			keys = append(keys, k)
		}
		if g[o.Key] == nil {
			g[o.Key] = map[string]bool{}
		}
		g[o.Key][o.Node] = true
	}
	for _, k := range keys {
		g := groups[k]
		nodes := map[string]bool{}
		for _, ns := range g {
			for n := range ns {
				nodes[n] = true
			}
		}
		if len(nodes) < 2 && len(g) < 2 {
			continue
		}
		r.Checked++
		if len(g) == 1 {
			continue
		}
		best, bestN, tie := "", 0, false
		for a, ns := range g {
			switch {
			case len(ns) > bestN:
				best, bestN, tie = a, len(ns), false
			case len(ns) == bestN:
				tie = true
			}
		}
		var parts []string
		for a, ns := range g {
			if a == best && !tie {
				continue
			}
			var names []string
			for n := range ns {
				names = append(names, n)
			}
			sort.Strings(names)
			parts = append(parts, fmt.Sprintf("%v answered %s", names, a))
		}
		sort.Strings(parts)
		if tie {
			r.violate(k.task, "task %s at applied index %d: no majority: %s", k.task, k.applied, strings.Join(parts, "; "))
		} else {
			r.violate(k.task, "task %s at applied index %d: majority answered %s, but %s", k.task, k.applied, best, strings.Join(parts, "; "))
		}
	}
	if r.Checked == 0 { // a checker that compared nothing must not pass
		r.violate("", "no read was answered by two nodes at one applied index")
	}
	return r
}
