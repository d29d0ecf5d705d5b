package jepsen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// busy is a history of n complete task cycles, 100 ms apart, with fault
// windows of the named faults spread over it and stale reads of each task
// from two nodes at one applied index: every checker passes on it.
func busy(n int, faults ...string) *hb {
	b := &hb{}
	for i := range n {
		t0 := int64(i) * 100
		task, key := fmt.Sprintf("t%d", i), fmt.Sprintf("k%d", i)
		fence := uint64(1000 + i)
		b.enqueue(t0, key, task)
		b.claim(t0+10, "w1", key, task, fence)
		b.add(t0+20, "w1", FHeartbeat, OK, Event{Task: task, Fence: fence})
		b.add(t0+30, "w1", FWrite, OK, Event{Task: task, Fence: fence})
		b.submit(t0+40, "w1", task, fence, OK, "")
		b.read(t0+50, "n1", task, uint64(2000+i), "DONE")
		b.read(t0+50, "n2", task, uint64(2000+i), "DONE")
	}
	span := int64(n) * 100
	for k, f := range faults {
		start := span * int64(k+1) / int64(len(faults)+1)
		b.evs = append(b.evs, Event{T: start * 1e6, Proc: "nemesis", Type: Start, F: FNemesis, Fault: f, Nodes: []NodeState{{ID: "n1"}}},
			Event{T: (start + 2000) * 1e6, Proc: "nemesis", Type: Stop, F: FNemesis, Fault: f})
	}
	return b
}

func checkBusy(t *testing.T, b *hb, named []string) *RunResult {
	t.Helper()
	h := b.history()
	h.Final = []NodeState{{ID: "n1", Applied: 9, Hash: "aa"}, {ID: "n2", Applied: 9, Hash: "aa"}}
	res, err := WriteResults(RunConfig{Name: "t", Faults: named, ReportDir: t.TempDir()}, h)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func violations(res *RunResult) string {
	var out []string
	for _, r := range res.Results {
		if r.Verdict != Pass {
			out = append(out, r.Name+": "+strings.Join(r.Violations, " | "))
		}
	}
	return strings.Join(out, "\n")
}

func TestBusyHistoryWithEveryFaultPasses(t *testing.T) {
	res := checkBusy(t, withMinimums(busy(300, FaultHalves, FaultKill)), []string{FaultHalves, FaultKill})
	if res.Failed {
		t.Fatalf("a complete run failed:\n%s", violations(res))
	}
	b, err := os.ReadFile(filepath.Join(res.Dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"fault_stats"`, `"name": "partition-halves"`, `"windows": 1`, `"held_s": 2`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("results.json lacks %s", want)
		}
	}
	html, _ := os.ReadFile(filepath.Join(res.Dir, "index.html"))
	if !strings.Contains(string(html), "<h2>Faults</h2>") {
		t.Error("index.html has no per-fault table")
	}
}

// The run: partition-kill named two faults, but only kill windows
// were recorded. It must fail, naming the fault that never held.
func TestFaultThatNeverHeldFailsTheRun(t *testing.T) {
	res := checkBusy(t, busy(300, FaultKill, FaultKill), []string{FaultHalves, FaultKill})
	if !res.Failed {
		t.Fatal("a run whose partition never happened passed")
	}
	if v := violations(res); !strings.Contains(v, "partition-halves held 0 times") {
		t.Fatalf("violation does not name the missing fault:\n%s", v)
	}
}

// A workload that stalled early does too little to test anything.
func TestStalledWorkloadFailsTheRun(t *testing.T) {
	res := checkBusy(t, busy(20, FaultKill), []string{FaultKill})
	if !res.Failed {
		t.Fatal("a run of 20 operations of each type passed")
	}
	if v := violations(res); !strings.Contains(v, "acknowledged enqueue operations, want at least 100") {
		t.Fatalf("violation does not name the operation count:\n%s", v)
	}
}

// Operations must be acknowledged while faults hold: a workload that stops
// during every window (here: no op inside the windows at the end) fails.
func TestNoOperationInsideFaultWindowsFailsTheRun(t *testing.T) {
	b := busy(300)
	for _, f := range []string{FaultKill, FaultHalves} {
		b.evs = append(b.evs, Event{T: 40_000 * 1e6, Proc: "nemesis", Type: Start, F: FNemesis, Fault: f},
			Event{T: 45_000 * 1e6, Proc: "nemesis", Type: Stop, F: FNemesis, Fault: f})
	}
	res := checkBusy(t, b, []string{FaultHalves, FaultKill})
	if v := violations(res); !res.Failed || !strings.Contains(v, "no operation acknowledged inside any of its 1 windows") {
		t.Fatalf("failed=%v:\n%s", res.Failed, v)
	}
}

// A replica that answers differently at the applied index where the
// others agree (a node that lost a task, say) is named.
func TestCatchesDivergentReplicaRead(t *testing.T) {
	b := busy(300, FaultKill)
	b.read(50_000, "n1", "t7", 5000, "DONE fence=1007")
	b.read(50_000, "n2", "t7", 5000, "DONE fence=1007")
	b.read(50_000, "n3", "t7", 5000, Absent)
	res := checkBusy(t, b, []string{FaultKill})
	v := violations(res)
	if !res.Failed || !strings.Contains(v, "replica-reads") || !strings.Contains(v, "[n3] answered absent") {
		t.Fatalf("divergent read not caught (failed=%v):\n%s", res.Failed, v)
	}
	// Different applied indexes are not comparable: no violation.
	c := &hb{}
	c.read(10, "n1", "t1", 5, "PENDING")
	c.read(10, "n2", "t1", 6, Absent)
	c.read(20, "n1", "t1", 7, "DONE")
	c.read(20, "n2", "t1", 7, "DONE")
	if r := CheckReads(c.history()); r.Verdict != Pass || r.Checked != 1 {
		t.Fatalf("reads at different indexes flagged: %s %v", r.Verdict, r.Violations)
	}
}

func TestReadCheckerThatComparedNothingFails(t *testing.T) {
	b := &hb{}
	b.read(10, "n1", "t1", 5, "DONE")
	b.read(20, "n2", "t1", 6, "DONE")
	if r := CheckReads(b.history()); r.Verdict != Violate {
		t.Fatalf("no comparison, verdict %s", r.Verdict)
	}
}

// failingInjector applies every fault but one, whose command fails.
type failingInjector struct {
	bad     string
	applied map[string]int
	healed  int
}

func (f *failingInjector) Apply(_ context.Context, name string, _ Budget) (Window, healFunc, error) {
	if name == f.bad {
		return Window{}, nil, errors.New(`iptables -w 5 -A INPUT -m statistic --mode random: exit status 2: Couldn't load match "statistic"`)
	}
	f.applied[name]++
	return Window{Nodes: []string{"n1"}}, func(context.Context) (string, error) { return "", nil }, nil
}

func (f *failingInjector) HealAll(context.Context) { f.healed++ }

// One fault's apply fails: the nemesis records it, heals everything and
// stops, and the run's verdict is fail, naming the fault, the command and
// its error, even though every other checker passes.
func TestFaultApplyFailureFailsTheRun(t *testing.T) {
	dir := t.TempDir()
	rec, err := NewRecorder(filepath.Join(dir, "nemesis.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	inj := &failingInjector{bad: FaultLoss, applied: map[string]int{}}
	faults := []string{FaultPause, FaultLoss}
	m := &Nemesis{Inject: inj, Rec: rec, Rand: rand.New(rand.NewPCG(1, 2)), Faults: append([]string(nil), faults...),
		HoldMin: 5 * time.Millisecond, HoldMax: 10 * time.Millisecond, Quiet: 10 * time.Millisecond,
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	runErr := m.Run(context.Background(), time.Now().Add(2*time.Second))
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if runErr == nil || inj.healed == 0 {
		t.Fatalf("nemesis went on after a failed fault: err=%v healed=%d", runErr, inj.healed)
	}
	f, err := os.Open(filepath.Join(dir, "nemesis.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := ReadEvents(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// A healthy workload beside it, with pause windows shifted inside it.
	b := busy(300)
	base := evs[0].T
	for _, e := range evs {
		e.T = e.T - base + 10_000*1e6
		b.evs = append(b.evs, e)
	}
	res := checkBusy(t, b, faults)
	v := violations(res)
	if !res.Failed || !strings.Contains(v, "fault packet-loss failed to apply") || !strings.Contains(v, `Couldn't load match "statistic"`) {
		t.Fatalf("failed=%v:\n%s", res.Failed, v)
	}
}

// A run's corruption windows are counted by the file kind they damaged and
// whether the node ran, from the window's detail as corrupt writes it.
func TestCorruptionWindowsCountedByKind(t *testing.T) {
	h := &History{Faults: []Fault{
		{Name: FaultCorrupt, Start: 1, End: 2, Detail: "n2: blob fsm/db/000005.blob while running, 8 bytes inverted at offsets [10]"},
		{Name: FaultCorrupt, Start: 3, End: 4, Detail: "n1: wal-segment raft-wal/00000000000000000001-0000000000000000.wal (sealed) at rest, 8 bytes inverted at offsets [10]"},
		{Name: FaultCorrupt, Start: 5, End: 6, Detail: "n3: wal-segment raft-wal/00000000000000000090-0000000000000001.wal (active) while running, 8 bytes inverted at offsets [10]"},
		{Name: FaultCorrupt, Start: 7, End: 8, Detail: "n3: sst fsm/db/000010.sst at rest, 8 bytes inverted at offsets [10]"},
		{Name: FaultKill, Start: 9, End: 10, Detail: "n1"},
	}}
	stats := faultStats(h, []string{FaultCorrupt})
	want := map[string]int{"blob while running": 1, "wal-segment at rest": 1, "wal-segment while running": 1, "sst at rest": 1}
	if got := stats[0].Damaged; !maps.Equal(got, want) {
		t.Fatalf("damaged %v, want %v", got, want)
	}
	if stats[1].Damaged != nil {
		t.Fatalf("kill windows counted as damage: %v", stats[1].Damaged)
	}
}
