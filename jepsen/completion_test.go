package jepsen

import (
	"fmt"
	"testing"
	"time"
)

// withMinimums adds to b what a run must do for the checkers with a
// minimum count to call it valid: cron slots, children of a diamond and
// retries of acknowledged keys, and the feature queues' runs, each done
// right.
func withMinimums(b *hb) *hb {
	withFeatures(b)
	for i := range MinCronSlots {
		b.cron(4000+int64(i)*10, fmt.Sprintf("cr%d", i), int64(i+1)*int64(time.Second))
	}
	b.enqueue(4100, "kp", "tp")
	b.claim(4110, "w1", "kp", "tp", 200)
	b.submit(4120, "w1", "tp", 200, OK, "")
	for i := range MinDepsChildren {
		key, task := fmt.Sprintf("kc%d", i), fmt.Sprintf("tc%d", i)
		b.enqueue(4100, key, task)
		b.evs = append(b.evs, Event{T: 4101e6, Proc: "p0", Type: OK, F: FDeps, Task: task, Detail: "tp"})
		b.claim(4130+int64(i)*10, "w1", key, task, uint64(201+i))
		b.submit(4135+int64(i)*10, "w1", task, uint64(201+i), OK, "")
	}
	for i := range MinRetries {
		b.add(4200+int64(i)*10, "p0", FEnqueueRetry, OK, Event{Key: "k1", Task: "t1"})
	}
	return b
}

// Test_CheckCompleted: a task completed after a reclaim passes; one whose
// only Submit was refused, or that was nacked and never came back, is
// named; a Submit of unknown outcome counts, since it may have applied.
func Test_CheckCompleted(t *testing.T) {
	if r := CheckCompleted(healthy().history()); r.Verdict != Pass || r.Checked != 2 {
		t.Fatalf("healthy: %+v", r)
	}
	b := healthy()
	b.enqueue(5000, "k3", "t3")
	b.claim(5010, "w1", "k3", "t3", 300)
	b.add(5020, "w1", FNack, OK, Event{Task: "t3", Fence: 300})
	mustCatch(t, CheckCompleted(b.history()), "t3")

	b = healthy()
	b.enqueue(5000, "k3", "t3")
	b.claim(5010, "w1", "k3", "t3", 300)
	b.submit(5020, "w1", "t3", 300, Fail, ErrStale)
	mustCatch(t, CheckCompleted(b.history()), "t3")
	b.submit(5030, "w2", "t3", 301, Info, "deadline exceeded")
	if r := CheckCompleted(b.history()); r.Verdict != Pass {
		t.Fatalf("a Submit of unknown outcome: %+v", r)
	}
}

// Test_CheckIdempotentRetry: a retry answered with the first task passes;
// one that made a new task is named; too few retries fail the run.
func Test_CheckIdempotentRetry(t *testing.T) {
	b := withMinimums(healthy())
	if r := CheckIdempotentRetry(b.history()); r.Verdict != Pass || r.Checked != MinRetries {
		t.Fatalf("retries answered with the first task: %+v", r)
	}
	b.add(5000, "p0", FEnqueueRetry, OK, Event{Key: "k2", Task: "t9"})
	mustCatch(t, CheckIdempotentRetry(b.history()), "t9")
	if r := CheckIdempotentRetry(healthy().history()); r.Verdict != Violate {
		t.Fatalf("a run without retries: %+v", r)
	}
}

// The cron and dependency checkers fail a run that never exercised them.
func Test_MinimumCounts(t *testing.T) {
	h := healthy().history()
	for _, r := range []Result{CheckCronOncePerSlot(h), CheckDepsOrder(h)} {
		if r.Verdict != Violate {
			t.Errorf("%s passed a run with nothing to check: %+v", r.Name, r)
		}
	}
}
