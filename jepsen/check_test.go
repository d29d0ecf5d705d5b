package jepsen

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
)

// hb builds doctored histories: each call appends an invocation at t and
// its completion at t+1 (times in milliseconds).
type hb struct {
	evs []Event
	op  int64
}

func (b *hb) add(t int64, proc, f, typ string, e Event) {
	b.op++
	inv := e
	inv.T, inv.Proc, inv.F, inv.Type, inv.Op = t*1e6, proc, f, Invoke, b.op
	inv.Done, inv.Err = false, ""
	b.evs = append(b.evs, inv)
	if typ == "" {
		return // never answered
	}
	done := e
	done.T, done.Proc, done.F, done.Type, done.Op = (t+1)*1e6, proc, f, typ, b.op
	done.Lease = 0
	b.evs = append(b.evs, done)
}

func (b *hb) enqueue(t int64, key, task string) {
	b.add(t, "p0", FEnqueue, OK, Event{Key: key, Task: task})
}
func (b *hb) claim(t int64, proc, key, task string, fence uint64) {
	b.add(t, proc, FClaim, OK, Event{Key: key, Task: task, Fence: fence, Lease: int64(2 * time.Second)})
}
func (b *hb) submit(t int64, proc, task string, fence uint64, typ string, err string) {
	b.add(t, proc, FSubmit, typ, Event{Task: task, Fence: fence, Err: err})
}
func (b *hb) history() *History {
	b.evs = append(b.evs, Event{T: 1, Proc: "workload", Type: Info, F: FPhase, Key: "drain"})
	return Parse(slices.Clone(b.evs))
}

// healthy is a history with no violation: two tasks, one reclaimed after a
// stall whose late Submit is refused.
func healthy() *hb {
	b := &hb{}
	b.enqueue(10, "k1", "t1")
	b.enqueue(20, "k2", "t2")
	b.claim(30, "w1", "k1", "t1", 100)
	b.add(40, "w1", FHeartbeat, OK, Event{Task: "t1", Fence: 100})
	b.add(50, "w1", FWrite, OK, Event{Task: "t1", Fence: 100})
	b.submit(60, "w1", "t1", 100, OK, "")
	b.claim(70, "w2", "k2", "t2", 110)
	b.claim(3000, "w1", "k2", "t2", 120) // w2 stalled past its lease
	b.add(3100, "w1", FWrite, OK, Event{Task: "t2", Fence: 120})
	b.submit(3200, "w1", "t2", 120, OK, "")
	b.add(3300, "w2", FWrite, Fail, Event{Task: "t2", Fence: 110})
	b.submit(3400, "w2", "t2", 110, Fail, ErrStale)
	b.read(3500, "n1", "t1", 9, "DONE")
	b.read(3500, "n2", "t1", 9, "DONE")
	return b
}

// read records a stale read of task from node at applied index.
func (b *hb) read(t int64, node, task string, applied uint64, answer string) {
	b.add(t, "r-"+node, FRead, OK, Event{Task: task, Node: node, Applied: applied, Key: answer})
}

func TestHealthyHistoryPasses(t *testing.T) {
	h := withMinimums(healthy()).history()
	h.Final = []NodeState{{ID: "n1", Applied: 9, Hash: "aa"}, {ID: "n2", Applied: 9, Hash: "aa"}}
	rs, _ := CheckAll(h)
	for _, r := range rs {
		if r.Verdict != Pass {
			t.Errorf("%s: %s %v %s", r.Name, r.Verdict, r.Violations, r.Note)
		}
	}
}

// mustCatch asserts that r is a violation naming task.
func mustCatch(t *testing.T, r Result, task string) {
	t.Helper()
	if r.Verdict != Violate {
		t.Fatalf("%s: verdict %s, want %s", r.Name, r.Verdict, Violate)
	}
	if task != "" && !slices.Contains(r.Tasks, task) {
		t.Fatalf("%s: tasks %v do not name %s; violations %v", r.Name, r.Tasks, task, r.Violations)
	}
	if !strings.Contains(strings.Join(r.Violations, "\n"), task) {
		t.Fatalf("%s: violations do not name %s: %v", r.Name, task, r.Violations)
	}
	t.Logf("%s caught: %s", r.Name, r.Violations[0])
}

func TestCatchesLostAck(t *testing.T) {
	b := healthy()
	b.enqueue(4000, "k3", "t3") // acknowledged, never delivered
	mustCatch(t, CheckLost(b.history()), "t3")
}

func TestCatchesUnexpectedTask(t *testing.T) {
	b := healthy()
	b.claim(4000, "w1", "never-enqueued", "t9", 200)
	mustCatch(t, CheckUnexpected(b.history()), "t9")
}

func TestCatchesDuplicateEnqueue(t *testing.T) {
	b := healthy()
	b.claim(4000, "w1", "k1", "t1b", 200) // key k1 acknowledged as t1
	mustCatch(t, CheckUnexpected(b.history()), "t1b")
}

func TestCatchesDoubleSubmit(t *testing.T) {
	b := healthy()
	b.submit(3500, "w2", "t2", 110, OK, "") // the stale worker's retry accepted too
	h := b.history()
	mustCatch(t, CheckDoubleSubmit(h), "t2")
	mustCatch(t, CheckLinearizable(h, 5*time.Second), "t2")
}

func TestCatchesStaleFenceAccepted(t *testing.T) {
	b := healthy()
	b.add(3500, "w2", FHeartbeat, OK, Event{Task: "t2", Fence: 110}) // after fence 120 was granted
	h := b.history()
	mustCatch(t, CheckStaleAccepted(h), "t2")
	mustCatch(t, CheckLinearizable(h, 5*time.Second), "t2")
}

func TestCatchesStaleDownstreamWrite(t *testing.T) {
	b := healthy()
	b.add(3500, "w2", FWrite, OK, Event{Task: "t2", Fence: 110})
	mustCatch(t, CheckStaleAccepted(b.history()), "t2")
}

func TestCatchesFenceGoingBackwards(t *testing.T) {
	b := healthy()
	b.claim(5000, "w3", "k2", "t2", 115) // after 120 was granted
	h := b.history()
	mustCatch(t, CheckFences(h), "t2")
	mustCatch(t, CheckLinearizable(h, 5*time.Second), "t2")
}

func TestCatchesRepeatedFence(t *testing.T) {
	b := healthy()
	b.claim(5000, "w3", "k1", "t1", 100)
	mustCatch(t, CheckFences(b.history()), "t1")
}

func TestCatchesLeaseLostWhileHeartbeating(t *testing.T) {
	b := healthy()
	b.claim(6000, "w3", "k4", "t4", 300)
	b.add(6500, "w3", FHeartbeat, OK, Event{Task: "t4", Fence: 300, Lease: int64(2 * time.Second)})
	b.add(7000, "w3", FHeartbeat, Fail, Event{Task: "t4", Fence: 300, Err: ErrStale})
	mustCatch(t, CheckLeaseLost(b.history()), "t4")

	// The same answer after the lease ran out is not a violation.
	b = healthy()
	b.add(6500, "w3", FHeartbeat, OK, Event{Task: "t4", Fence: 300, Lease: int64(2 * time.Second)})
	b.add(9000, "w3", FHeartbeat, Fail, Event{Task: "t4", Fence: 300, Err: ErrStale})
	if r := CheckLeaseLost(b.history()); r.Verdict != Pass {
		t.Fatalf("late stale heartbeat flagged: %v", r.Violations)
	}
}

func TestCatchesSplitBrain(t *testing.T) {
	h := healthy().history()
	h.Final = []NodeState{{ID: "n1", Applied: 9, Hash: "aa"}, {ID: "n2", Applied: 9, Hash: "bb"}, {ID: "n3", Applied: 9, Hash: "aa"}}
	r := CheckSplitBrain(h)
	if r.Verdict != Violate || !strings.Contains(r.Violations[0], "n2") {
		t.Fatalf("split brain not caught: %+v", r)
	}
	h.Final[1].Applied = 8 // different index: not comparable
	if r := CheckSplitBrain(h); r.Verdict != Violate || !strings.Contains(r.Violations[0], "n3") {
		t.Fatalf("unconverged nodes: %+v", r)
	}
}

func TestRecoveryMeasuresFirstWriteAfterHeal(t *testing.T) {
	b := healthy()
	b.evs = append(b.evs,
		Event{T: 100e6, Proc: "nemesis", Type: Start, F: FNemesis, Fault: "kill"},
		Event{T: 200e6, Proc: "nemesis", Type: Stop, F: FNemesis, Fault: "kill"})
	b.enqueue(1199, "k5", "t5")
	b.claim(1300, "w1", "k5", "t5", 400)
	r, recs := CheckRecovery(b.history())
	if r.Verdict != Pass || len(recs) != 1 || recs[0].Secs != 1.0 {
		t.Fatalf("recovery: %+v %+v", r, recs)
	}
}

func TestCatchesUnavailability(t *testing.T) {
	b := healthy()
	b.evs = append(b.evs,
		Event{T: 4000e6, Proc: "nemesis", Type: Start, F: FNemesis, Fault: "pause", Nodes: []NodeState{{ID: "n1"}}},
		Event{T: 17000e6, Proc: "nemesis", Type: Stop, F: FNemesis, Fault: "pause"})
	b.enqueue(3999, "k8", "t8")
	b.enqueue(16000, "k9", "t9") // 12 s without an acknowledged enqueue
	h := b.history()
	h.DrainAt = 0
	r := CheckAvailability(h)
	if r.Verdict != Violate || !strings.Contains(r.Violations[0], "pause[n1]") {
		t.Fatalf("%+v", r)
	}
}

func TestUnknownSubmitIsLinearizable(t *testing.T) {
	b := healthy()
	b.enqueue(5000, "k6", "t6")
	b.claim(5100, "w1", "k6", "t6", 500)
	b.add(5200, "w1", FSubmit, "", Event{Task: "t6", Fence: 500}) // no answer
	b.submit(5300, "w1", "t6", 500, OK, "")                       // the retry: not "already done"
	if r := CheckLinearizable(b.history(), 5*time.Second); r.Verdict != Pass {
		t.Fatalf("%+v", r)
	}
}

func TestRetriedSubmitAnsweredAlreadyDone(t *testing.T) {
	b := healthy()
	b.enqueue(5000, "k7", "t7")
	b.claim(5100, "w1", "k7", "t7", 700)
	b.add(5200, "w1", FSubmit, OK, Event{Task: "t7", Fence: 700, Done: true}) // its own first attempt won
	h := b.history()
	for _, r := range []Result{CheckDoubleSubmit(h), CheckLinearizable(h, 5*time.Second)} {
		if r.Verdict != Pass {
			t.Fatalf("%+v", r)
		}
	}
}

func TestRecorderRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	rec, err := NewRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	evs := healthy().evs
	for _, e := range evs {
		rec.Record(e)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	h, got, err := ReadHistoryFile(path)
	if err != nil || len(got) != len(evs) || len(h.Ops) != len(evs)/2 {
		t.Fatalf("read %d events, %d ops, err %v", len(got), len(h.Ops), err)
	}
}

func TestRegisterRefusesOlderFence(t *testing.T) {
	r := &Register{top: map[string]uint64{}}
	for _, fence := range []uint64{5, 5, 7} { // the same fence twice is current too
		if !r.Write("t", fence) {
			t.Fatalf("register refused current fence %d", fence)
		}
	}
	if r.Write("t", 6) {
		t.Fatal("register accepted fence 6 after 7")
	}
}

func TestClassify(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("x: %w", client.ErrStaleFence):     Fail,
		fmt.Errorf("x: %w", client.ErrNoLeader):       Info,
		fmt.Errorf("x: %w", context.DeadlineExceeded): Info,
		fmt.Errorf("x: %w", client.ErrNotFound):       Fail,
	} {
		if got, _ := classify(err); got != want {
			t.Errorf("classify(%v) = %s, want %s", err, got, want)
		}
	}
}

// An interrupted run kills the workload mid-write: the history's last
// line is cut short. Everything before it still reads; a bad line in the
// middle is still an error.
func Test_ReadEventsDropsTruncatedLastLine(t *testing.T) {
	whole := `{"t":1,"proc":"p","type":"invoke","f":"enqueue","op":1}` + "\n" + `{"t":2,"proc":"p","type":"ok","f":"enqueue","op":1}` + "\n"
	evs, err := ReadEvents(strings.NewReader(whole + `{"t":3,"proc":"p","ty`))
	if err != nil || len(evs) != 2 {
		t.Fatalf("truncated last line: %d events, err %v", len(evs), err)
	}
	if _, err := ReadEvents(strings.NewReader(`{"t":3,"pro` + "\n" + whole)); err == nil {
		t.Fatal("a bad line before the end was accepted")
	}
}
