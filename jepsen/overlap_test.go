package jepsen

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func Test_OverlapBudget(t *testing.T) {
	cases := []struct {
		name   string
		n      int
		active []heldFault
		fault  string
		ok     bool
		want   Budget
	}{
		{"nothing held: anything, anywhere", 3, nil, FaultCorrupt, true, Budget{}},
		{"alone faults never overlap", 5, []heldFault{{FaultLoss, nil}}, FaultMembership, false, Budget{}},
		{"nothing overlaps an alone fault", 5, []heldFault{{FaultRollingRestart, []string{"n1"}}}, FaultLoss, false, Budget{}},
		{"no fault overlaps itself", 5, []heldFault{{FaultKill, []string{"n1"}}}, FaultKill, false, Budget{}},
		{"5 nodes: a kill beside an isolated leader, on another node", 5,
			[]heldFault{{FaultLeader, []string{"n2"}}}, FaultKill, true, Budget{}},
		{"5 nodes: two nodes impaired, a third fault must stay on them", 5,
			[]heldFault{{FaultLeader, []string{"n2"}}, {FaultKill, []string{"n4"}}}, FaultOneWay, true, Budget{Within: []string{"n2", "n4"}}},
		{"3 nodes: a pause may only hit the isolated node", 3,
			[]heldFault{{FaultLeader, []string{"n3"}}}, FaultPause, true, Budget{Within: []string{"n3"}}},
		{"3 nodes: two process faults cannot share the one node", 3,
			[]heldFault{{FaultKill, []string{"n3"}}}, FaultClock, false, Budget{}},
		{"5 nodes: a clock offset avoids the killed node", 5,
			[]heldFault{{FaultKill, []string{"n3"}}}, FaultClock, true, Budget{Avoid: []string{"n3"}}},
		{"a partition takes in the killed node", 5,
			[]heldFault{{FaultKill, []string{"n3"}}}, FaultHalves, true, Budget{Must: []string{"n3"}}},
		{"packet loss impairs no one: a partition may follow it", 3,
			[]heldFault{{FaultLoss, []string{"n1", "n2", "n3"}}}, FaultHalves, true, Budget{Must: []string{}}},
		{"packet loss beside a partition", 5,
			[]heldFault{{FaultHalves, []string{"n1", "n5"}}}, FaultLoss, true, Budget{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := overlapBudget(tc.fault, tc.active, tc.n)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (budget %+v)", ok, tc.ok, b)
			}
			if ok && fmt.Sprint(b) != fmt.Sprint(tc.want) {
				t.Fatalf("budget %+v, want %+v", b, tc.want)
			}
		})
	}
}

// budgetInjector plays the real injector's node choice under a Budget
// and checks, at every apply and heal, what the scheduler promises: at
// most two faults held, each new one allowed beside the others, the
// impaired nodes a minority, no two process faults on one node.
type budgetInjector struct {
	t    *testing.T
	n    int
	r    *rand.Rand
	mu   sync.Mutex
	held map[string]heldFault // by fault name
	// overlaps counts applies made while another fault held.
	overlaps, applied int
	pairs             map[string]bool
	errs              []string
}

func (f *budgetInjector) Apply(_ context.Context, name string, b Budget) (Window, healFunc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var active []heldFault
	for _, h := range f.held {
		active = append(active, h)
	}
	if _, ok := overlapBudget(name, active, f.n); !ok {
		f.errs = append(f.errs, fmt.Sprintf("%s started beside %v", name, active))
	}
	var nodes []string
	switch classOf(name) {
	case classDegrade:
		for i := 1; i <= f.n; i++ {
			nodes = append(nodes, fmt.Sprintf("n%d", i))
		}
	case classHalves:
		nodes = append(nodes, b.Must...)
		for i := 1; len(nodes) < f.n/2; i++ {
			if id := fmt.Sprintf("n%d", i); !slices.Contains(nodes, id) {
				nodes = append(nodes, id)
			}
		}
	default:
		c := b.candidates(f.n)
		nodes = []string{c[f.r.IntN(len(c))]}
	}
	f.held[name] = heldFault{name, nodes}
	imp, proc := map[string]bool{}, map[string]int{}
	for _, h := range f.held {
		for _, id := range h.impaired() {
			imp[id] = true
		}
		if classOf(h.Name) == classProc {
			proc[h.Nodes[0]]++
		}
	}
	if len(f.held) > 2 || len(imp) > (f.n-1)/2 {
		f.errs = append(f.errs, fmt.Sprintf("held %v: %d impaired", f.held, len(imp)))
	}
	for id, k := range proc {
		if k > 1 {
			f.errs = append(f.errs, fmt.Sprintf("two process faults on %s: %v", id, f.held))
		}
	}
	f.applied++
	if len(f.held) > 1 {
		f.overlaps++
		var ns []string
		for k := range f.held {
			ns = append(ns, k)
		}
		slices.Sort(ns)
		f.pairs[strings.Join(ns, "+")] = true
	}
	return Window{Nodes: nodes}, func(context.Context) (string, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.held, name)
		return "", nil
	}, nil
}

func (f *budgetInjector) HealAll(context.Context) { f.errs = append(f.errs, "HealAll called") }

// runOverlapNemesis runs the scheduler for d against a budgetInjector and
// returns it and the nemesis history it recorded.
func runOverlapNemesis(t *testing.T, n int, faults []string, d time.Duration, seed uint64) (*budgetInjector, []Event) {
	t.Helper()
	dir := t.TempDir()
	rec, err := NewRecorder(filepath.Join(dir, "nemesis.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	inj := &budgetInjector{t: t, n: n, r: rand.New(rand.NewPCG(seed, 7)), held: map[string]heldFault{}, pairs: map[string]bool{}}
	m := &Nemesis{Inject: inj, Rec: rec, Rand: rand.New(rand.NewPCG(seed, 3)), Faults: append([]string(nil), faults...),
		HoldMin: 20 * time.Millisecond, HoldMax: 60 * time.Millisecond, Quiet: 10 * time.Millisecond, Overlap: 2, N: n,
		log: slog.New(slog.DiscardHandler)}
	if err := m.Run(context.Background(), time.Now().Add(d)); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "nemesis.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := ReadEvents(f)
	if err != nil {
		t.Fatal(err)
	}
	return inj, evs
}

// The scheduler overlaps compatible faults, never more than two, never
// past a minority impaired, never two process faults on one node, and
// still brings every fault round; every window it opens it closes.
func Test_NemesisOverlapsCompatibleFaults(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			faults := []string{FaultHalves, FaultLeader, FaultOneWay, FaultKill, FaultPause, FaultLoss, FaultClock, FaultCorrupt, FaultMembership}
			inj, evs := runOverlapNemesis(t, n, faults, 3*time.Second, uint64(n))
			if len(inj.errs) > 0 {
				t.Fatalf("scheduler broke its rules:\n%s", strings.Join(inj.errs, "\n"))
			}
			if inj.overlaps < 3 {
				t.Fatalf("%d of %d faults started beside another; want overlaps", inj.overlaps, inj.applied)
			}
			h := Parse(evs)
			per := map[string]int{}
			for _, f := range h.Faults {
				if f.End == 1<<63-1 {
					t.Fatalf("window %d of %s never closed", f.Win, f.Name)
				}
				per[f.Name]++
			}
			for _, f := range faults {
				if per[f] == 0 {
					t.Fatalf("%s never came up: %v", f, per)
				}
			}
			if len(h.Faults) != inj.applied {
				t.Fatalf("%d windows recorded, %d faults applied", len(h.Faults), inj.applied)
			}
			t.Logf("%d faults, %d overlapping; pairs %v", inj.applied, inj.overlaps, inj.pairs)
		})
	}
}

// Overlapping windows, the same fault's included, pair start and stop by
// window number: each gets its own end, the coverage checker counts each
// fault's windows and the operations inside them, and a finding at a heal
// fails the run, naming the fault and the window.
func Test_OverlappingWindowsRecordedAndReported(t *testing.T) {
	b := busy(300)
	ms := func(v int64) int64 { return v * 1e6 }
	ev := func(at int64, typ, fault string, win int64, err string) Event {
		return Event{T: ms(at), Proc: "nemesis", Type: typ, F: FNemesis, Fault: fault, Win: win, Err: err,
			Nodes: []NodeState{{ID: "n1"}}}
	}
	// kill(1) [5000, 9000] overlaps loss(2) [7000, 12000]; kill(3) [8000,
	// 15000] overlaps both, and kill(1) ends inside it.
	b.evs = append(b.evs,
		ev(5000, Start, FaultKill, 1, ""), ev(7000, Start, FaultLoss, 2, ""), ev(8000, Start, FaultKill, 3, ""),
		ev(9000, Stop, FaultKill, 1, ""), ev(12000, Stop, FaultLoss, 2, ""), ev(15000, Stop, FaultKill, 3, ""),
		ev(20000, Start, FaultMembership, 4, ""), ev(25000, Stop, FaultMembership, 4, "finding: n2 not back to 3 voters"))
	h := b.history()
	want := map[int64][2]int64{1: {5000, 9000}, 2: {7000, 12000}, 3: {8000, 15000}, 4: {20000, 25000}}
	if len(h.Faults) != len(want) {
		t.Fatalf("%d windows, want %d: %+v", len(h.Faults), len(want), h.Faults)
	}
	for _, f := range h.Faults {
		w := want[f.Win]
		if f.Start != ms(w[0]) || f.End != ms(w[1]) {
			t.Fatalf("window %d (%s): [%d, %d], want %v ms", f.Win, f.Name, f.Start/1e6, f.End/1e6, w)
		}
	}
	h.Final = []NodeState{{ID: "n1", Applied: 9, Hash: "aa"}, {ID: "n2", Applied: 9, Hash: "aa"}}
	faults := []string{FaultKill, FaultLoss, FaultMembership}
	cov := DefaultCoverage(faults, 1)
	stats := faultStats(h, cov.Faults)
	got := map[string]FaultStat{}
	for _, s := range stats {
		got[s.Name] = s
	}
	if got[FaultKill].Windows != 2 || got[FaultLoss].Windows != 1 || got[FaultMembership].Windows != 1 {
		t.Fatalf("windows per fault: %+v", stats)
	}
	// 100 ms per task cycle: kill held 4 s + 7 s, loss 5 s; the ops
	// inside overlapping windows count for each fault that held them.
	if got[FaultKill].OpsInWin <= got[FaultLoss].OpsInWin || got[FaultLoss].OpsInWin == 0 {
		t.Fatalf("ops inside windows: %+v", stats)
	}
	if r := CheckCoverage(h, cov); r.Verdict != Pass {
		t.Fatalf("coverage: %v", r.Violations)
	}
	r := CheckFindings(h)
	if r.Verdict == Pass || len(r.Violations) != 1 || !strings.Contains(r.Violations[0], "membership (window 4") ||
		!strings.Contains(r.Violations[0], "not back to 3 voters") {
		t.Fatalf("findings: %+v", r)
	}
	res, err := WriteResults(RunConfig{Name: "t", Faults: faults, ReportDir: t.TempDir(), Overlap: 2}, h)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Failed || !strings.Contains(violations(res), "nemesis-findings") {
		t.Fatalf("a finding did not fail the run: %s", violations(res))
	}
	html, err := os.ReadFile(filepath.Join(res.Dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	// Every plot draws each window: twice as many kill windows as loss.
	if k, l := strings.Count(string(html), "<title>kill"), strings.Count(string(html), "<title>packet-loss"); l == 0 || k != 2*l {
		t.Fatalf("the report plots %d kill and %d packet-loss windows", k, l)
	}
	if !strings.Contains(string(html), "<pre>finding: n2 not back to 3 voters</pre>") || !strings.Contains(string(html), "up to 2 overlapping faults") {
		t.Fatalf("the report does not show the finding on its window, or the overlap")
	}
}

// A rolling upgrade must hold once, whatever the per-fault minimum.
func Test_CoverageOnceFaultMustHold(t *testing.T) {
	h := busy(300, FaultKill).history()
	cov := DefaultCoverage([]string{FaultKill}, 1)
	cov.Once = []string{FaultUpgrade}
	r := CheckCoverage(h, cov)
	if r.Verdict == Pass || !strings.Contains(strings.Join(r.Violations, " "), "rolling-upgrade never held") {
		t.Fatalf("coverage passed without the upgrade: %+v", r)
	}
	h = busy(300, FaultKill, FaultUpgrade).history()
	if r := CheckCoverage(h, cov); r.Verdict != Pass {
		t.Fatalf("coverage: %v", r.Violations)
	}
}
