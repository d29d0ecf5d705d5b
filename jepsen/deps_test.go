package jepsen

import (
	"slices"
	"strings"
	"testing"
)

// Test_CheckDepsOrder: a child claimed after its parent's Submit passes;
// one claimed before it, or whose parent was never submitted, violates;
// a refused Submit does not count as the parent's completion.
func Test_CheckDepsOrder(t *testing.T) {
	build := func(childAt int64, parentSubmit string) *History {
		b := &hb{}
		b.enqueue(10, "p", "tp")
		b.enqueue(10, "c", "tc")
		b.evs = append(b.evs, Event{T: 11e6, Proc: "p0", Type: OK, F: FDeps, Task: "tc", Detail: "tp"})
		b.claim(20, "w1", "p", "tp", 100)
		if parentSubmit != "" {
			b.submit(30, "w1", "tp", 100, parentSubmit, "")
		}
		b.claim(childAt, "w2", "c", "tc", 101)
		// A second child, claimed in order, so that the run reaches
		// MinDepsChildren.
		b.enqueue(10, "d", "td")
		b.evs = append(b.evs, Event{T: 11e6, Proc: "p0", Type: OK, F: FDeps, Task: "td", Detail: "tp"})
		b.claim(childAt+100, "w2", "d", "td", 102)
		return b.history()
	}
	if r := CheckDepsOrder(build(40, OK)); r.Verdict != Pass || r.Checked != 2 {
		t.Fatalf("child after its parent: %+v", r)
	}
	if r := CheckDepsOrder(build(40, Info)); r.Verdict != Pass {
		t.Fatalf("child after a Submit of unknown outcome: %+v", r)
	}
	for name, h := range map[string]*History{
		"claimed before the parent's Submit": build(25, OK),
		"parent never submitted":             build(40, ""),
		"parent's Submit refused":            build(40, Fail),
	} {
		r := CheckDepsOrder(h)
		if r.Verdict != Violate || !slices.ContainsFunc(r.Violations, func(v string) bool { return strings.Contains(v, "tp") }) {
			t.Fatalf("%s: %+v", name, r)
		}
	}
}
