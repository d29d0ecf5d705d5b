package jepsen

import (
	"fmt"
	"testing"
	"time"
)

// Histories of the feature workload, built by hand: each helper adds what
// a run does right for one feature, enough for its checker's minimum, at
// times (ms) after at. The tests then add one wrong thing each.

func (b *hb) xclaim(t int64, proc, queue, task string, fence uint64) {
	b.add(t, proc, FXClaim, OK, Event{Task: task, Fence: fence, Queue: queue, Lease: int64(2 * time.Second)})
}

func (b *hb) xop(t int64, proc, f, typ, queue, task string, fence uint64) {
	b.add(t, proc, f, typ, Event{Task: task, Fence: fence, Queue: queue})
}

func (b *hb) xread(t int64, queue, task, state string) {
	b.add(t, "xr0", FXRead, OK, Event{Task: task, Queue: queue, Key: state})
}

// fault adds a nemesis window of name over [start, end] (ms).
func (b *hb) fault(start, end int64, name string) {
	b.evs = append(b.evs, Event{T: start * 1e6, Proc: "nemesis", Type: Start, F: FNemesis, Fault: name, Win: start},
		Event{T: end * 1e6, Proc: "nemesis", Type: Stop, F: FNemesis, Fault: name, Win: start})
}

// limitRun sets the limit and runs pairs of claims that overlap, each
// released by its Submit: the limit is reached once per pair.
func limitRun(b *hb, at int64, pairs int) {
	b.add(at, "lim-admin", FLimitSet, OK, Event{Queue: LimitQueue, Key: fmt.Sprint(LimitMax)})
	for i := range pairs {
		t0 := at + 10 + int64(i)*300
		a, c := fmt.Sprintf("la%d", i), fmt.Sprintf("lb%d", i)
		b.xclaim(t0, "lim-w0", LimitQueue, a, uint64(1000+2*i))
		b.xclaim(t0+10, "lim-w1", LimitQueue, c, uint64(1001+2*i))
		b.xop(t0+200, "lim-w0", FXSubmit, OK, LimitQueue, a, uint64(1000+2*i))
		b.xop(t0+210, "lim-w1", FXSubmit, OK, LimitQueue, c, uint64(1001+2*i))
	}
}

// retryRun fails n tasks RetryMax times each, and reads them dead.
func retryRun(b *hb, at int64, n int) {
	for i := range n {
		task := fmt.Sprintf("rt%d", i)
		for a := range RetryMax {
			t0, fence := at+int64(i*100+a*20), uint64(2000+i*10+a)
			b.xclaim(t0, "retry", RetryQueue, task, fence)
			b.xop(t0+5, "retry", FXNack, OK, RetryQueue, task, fence)
		}
		b.xread(at+5000, RetryQueue, task, stateDead)
	}
}

// snoozeRun snoozes n tasks for 2 s each and claims them after.
func snoozeRun(b *hb, at int64, n int) {
	for i := range n {
		task, t0, fence := fmt.Sprintf("st%d", i), at+int64(i)*10, uint64(3000+i*10)
		b.xclaim(t0, "snooze", SnoozeQueue, task, fence)
		b.add(t0+5, "snooze", FSnooze, OK, Event{Task: task, Fence: fence, Queue: SnoozeQueue, Delay: int64(2 * time.Second)})
		b.xclaim(t0+2100, "snooze", SnoozeQueue, task, fence+1)
		b.xop(t0+2110, "snooze", FXSubmit, OK, SnoozeQueue, task, fence+1)
	}
}

// cancelRun cancels n running tasks, each told so at its next heartbeat
// and refused its Submit.
func cancelRun(b *hb, at int64, n int) {
	for i := range n {
		task, t0, fence := fmt.Sprintf("ct%d", i), at+int64(i)*50, uint64(4000+i)
		b.xclaim(t0, "cancel", CancelQueue, task, fence)
		b.xop(t0+5, "cancel", FXHeartbeat, OK, CancelQueue, task, fence)
		b.add(t0+10, "cancel-admin", FCancel, OK, Event{Task: task, Queue: CancelQueue, Cancel: true})
		b.add(t0+15, "cancel", FXHeartbeat, OK, Event{Task: task, Fence: fence, Queue: CancelQueue, Cancel: true})
		b.add(t0+20, "cancel", FXSubmit, Fail, Event{Task: task, Fence: fence, Queue: CancelQueue, Err: ErrCancelled})
		b.xread(at+5000, CancelQueue, task, stateCancelled)
	}
}

// timeoutRun runs n claims past their 1.5 s timeout: heartbeats accepted
// before the deadline, TIMED_OUT after, the task read FAILED, the late
// Submit refused.
func timeoutRun(b *hb, at int64, n int) {
	for i := range n {
		task, t0, fence := fmt.Sprintf("tt%d", i), at+int64(i)*3000, uint64(5000+i)
		b.add(t0, "timeout", FXClaim, OK, Event{Task: task, Fence: fence, Queue: TimeoutQueue, Lease: int64(2 * time.Second),
			Delay: int64(1500 * time.Millisecond)})
		b.xop(t0+500, "timeout", FXHeartbeat, OK, TimeoutQueue, task, fence)
		b.xop(t0+1000, "timeout", FXHeartbeat, OK, TimeoutQueue, task, fence)
		b.add(t0+1500, "timeout", FXHeartbeat, Fail, Event{Task: task, Fence: fence, Queue: TimeoutQueue, Err: ErrTimedOut})
		b.xread(t0+1700, TimeoutQueue, task, stateFailed)
		b.add(t0+1800, "timeout", FXSubmit, Fail, Event{Task: task, Fence: fence, Queue: TimeoutQueue, Err: ErrStale})
	}
}

// withFeatures adds a passing run of every feature, at 10 s on.
func withFeatures(b *hb) *hb {
	limitRun(b, 10_000, 12)
	retryRun(b, 20_000, MinDeadLettered)
	snoozeRun(b, 30_000, MinSnoozes)
	cancelRun(b, 40_000, MinCancelRunning)
	timeoutRun(b, 50_000, MinTimeouts)
	return b
}

// mustPass asserts that r passed.
func mustPass(t *testing.T, what string, r Result) {
	t.Helper()
	if r.Verdict != Pass {
		t.Fatalf("%s: %s %v (%s)", what, r.Verdict, r.Violations, r.Note)
	}
}

// mustFail asserts that r is a violation (naming task, when given).
func mustFail(t *testing.T, what string, r Result, task string) {
	t.Helper()
	if task != "" {
		mustCatch(t, r, task)
		return
	}
	if r.Verdict != Violate {
		t.Fatalf("%s: %s, want a violation (%s)", what, r.Verdict, r.Note)
	}
	t.Logf("%s caught: %v", what, r.Violations)
}

// The limit checker passes spans at the limit, fails a third span that
// overlaps two, and counts a claim as released once its lease could
// have run out, or at once during a clock-offset fault.
func Test_CheckLimits(t *testing.T) {
	b := &hb{}
	limitRun(b, 0, 12)
	r := CheckLimits(b.history())
	mustPass(t, "pairs at the limit", r)
	if r.Checked != 24 || r.Note != "limit 2: 24 spans, at the limit 12 times, peak 2" {
		t.Fatalf("counts: %d %q", r.Checked, r.Note)
	}

	b = &hb{}
	limitRun(b, 0, 12)
	b.xclaim(10+5*300+20, "lim-w2", LimitQueue, "lc", 3000) // a third one inside pair 5
	b.xop(10+5*300+100, "lim-w2", FXSubmit, OK, LimitQueue, "lc", 3000)
	mustFail(t, "three running under a limit of two", CheckLimits(b.history()), "lc")

	// A claim never released counts until invoke + lease - slack (1.5 s).
	held := func(pairAt int64) *History {
		b := &hb{}
		limitRun(b, 0, 12)
		b.xclaim(40_000, "lim-w2", LimitQueue, "ld", 3001)
		limitPair(b, pairAt, "late", 3100)
		return b.history()
	}
	mustFail(t, "a pair while an unreleased claim's lease runs", CheckLimits(held(40_500)), "late-b")
	mustPass(t, "a pair after the unreleased claim's lease ran out", CheckLimits(held(41_600)))
	b = &hb{}
	limitRun(b, 0, 12)
	b.xclaim(40_000, "lim-w2", LimitQueue, "ld", 3001)
	limitPair(b, 40_500, "late", 3100)
	b.fault(39_000, 39_500, FaultClock)
	mustPass(t, "the same during a clock offset, where no lease is provably held", CheckLimits(b.history()))

	b = &hb{}
	limitRun(b, 0, 12)
	b.evs = b.evs[2:] // the limit's set
	mustFail(t, "limit never set", CheckLimits(b.history()), "")
	b = &hb{}
	limitRun(b, 0, MinLimitHeld/2-1)
	mustFail(t, "too few spans", CheckLimits(b.history()), "")
}

// limitPair adds two overlapping spans at at, tasks name-a and name-b.
func limitPair(b *hb, at int64, name string, fence uint64) {
	b.xclaim(at, "lim-w0", LimitQueue, name+"-a", fence)
	b.xclaim(at+10, "lim-w1", LimitQueue, name+"-b", fence+1)
	b.xop(at+200, "lim-w0", FXSubmit, OK, LimitQueue, name+"-a", fence)
	b.xop(at+210, "lim-w1", FXSubmit, OK, LimitQueue, name+"-b", fence+1)
}

// The retry checker fails a fourth delivery and a task that used all its
// attempts but is not dead, and a run with too few dead tasks.
func Test_CheckRetries(t *testing.T) {
	b := &hb{}
	retryRun(b, 0, MinDeadLettered)
	mustPass(t, "retried to the dead letters", CheckRetries(b.history()))

	b = &hb{}
	retryRun(b, 0, MinDeadLettered)
	b.xclaim(3000, "retry", RetryQueue, "rt1", 2999)
	mustFail(t, "delivered past max attempts", CheckRetries(b.history()), "rt1")

	b = &hb{}
	retryRun(b, 0, MinDeadLettered+1)
	b.xread(9000, RetryQueue, "rt2", "TASK_STATE_PENDING")
	mustFail(t, "all attempts used, not dead", CheckRetries(b.history()), "rt2")

	b = &hb{}
	retryRun(b, 0, MinDeadLettered-1)
	mustFail(t, "too few dead", CheckRetries(b.history()), "")
}

// The snooze checker fails a delivery before the snooze ran out (unless a
// clock offset was on), a snoozed task never delivered again, and a run
// with too few snoozes.
func Test_CheckSnooze(t *testing.T) {
	b := &hb{}
	snoozeRun(b, 0, MinSnoozes)
	mustPass(t, "delivered after the snooze", CheckSnooze(b.history()))

	early := func() *hb {
		b := &hb{}
		snoozeRun(b, 0, MinSnoozes)
		b.xclaim(5000, "snooze", SnoozeQueue, "se", 3900)
		b.add(5005, "snooze", FSnooze, OK, Event{Task: "se", Fence: 3900, Queue: SnoozeQueue, Delay: int64(2 * time.Second)})
		b.xclaim(6000, "snooze", SnoozeQueue, "se", 3901) // 1 s early
		return b
	}
	mustFail(t, "delivered a second early", CheckSnooze(early().history()), "se")
	b = early()
	b.fault(5500, 5800, FaultClock)
	mustPass(t, "the same during a clock offset", CheckSnooze(b.history()))

	b = &hb{}
	snoozeRun(b, 0, MinSnoozes)
	b.xclaim(5000, "snooze", SnoozeQueue, "sl", 3950)
	b.add(5005, "snooze", FSnooze, OK, Event{Task: "sl", Fence: 3950, Queue: SnoozeQueue, Delay: int64(2 * time.Second)})
	mustFail(t, "never delivered again", CheckSnooze(b.history()), "sl")

	b = &hb{}
	snoozeRun(b, 0, MinSnoozes-1)
	mustFail(t, "too few snoozes", CheckSnooze(b.history()), "")
}

// The cancel checker fails an accepted Submit, a delivery, and a
// heartbeat without cancel_requested after the cancel, a final state
// other than CANCELLED, and a run with too few cancels of running tasks.
func Test_CheckCancel(t *testing.T) {
	b := &hb{}
	cancelRun(b, 0, MinCancelRunning)
	mustPass(t, "cancelled while running", CheckCancel(b.history()))

	for name, wrong := range map[string]func(b *hb){
		"Submit accepted after the cancel": func(b *hb) { b.xop(1000, "cancel", FXSubmit, OK, CancelQueue, "ct1", 4001) },
		"delivered after the cancel":       func(b *hb) { b.xclaim(1000, "cancel", CancelQueue, "ct1", 4100) },
		"heartbeat not told":               func(b *hb) { b.xop(1000, "cancel", FXHeartbeat, OK, CancelQueue, "ct1", 4001) },
		"completed at the end":             func(b *hb) { b.xread(9000, CancelQueue, "ct1", "TASK_STATE_COMPLETED") },
	} {
		b := &hb{}
		cancelRun(b, 0, MinCancelRunning)
		wrong(b)
		mustFail(t, name, CheckCancel(b.history()), "ct1")
	}

	b = &hb{}
	cancelRun(b, 0, MinCancelRunning-1)
	mustFail(t, "too few cancels", CheckCancel(b.history()), "")
}

// The timeout checker fails a heartbeat accepted past the deadline (unless
// a clock offset was on), a Submit accepted after the claim was seen
// ended, a task that read FAILED and later something else, and a run
// with too few timeouts.
func Test_CheckTimeouts(t *testing.T) {
	b := &hb{}
	timeoutRun(b, 0, MinTimeouts)
	mustPass(t, "claims ended by their timeout", CheckTimeouts(b.history()))

	late := func() *hb {
		b := &hb{}
		timeoutRun(b, 0, MinTimeouts)
		b.xop(3000+1400+700, "timeout", FXHeartbeat, OK, TimeoutQueue, "tt1", 5001) // 0.7 s past the deadline
		return b
	}
	mustFail(t, "heartbeat past the deadline", CheckTimeouts(late().history()), "tt1")
	b = late()
	b.fault(3000, 3500, FaultClock)
	mustPass(t, "the same during a clock offset", CheckTimeouts(b.history()))
	b = &hb{}
	timeoutRun(b, 0, MinTimeouts)
	b.xclaim(20_000, "timeout", TimeoutQueue, "tn", 5100) // stored without a deadline
	b.xop(25_000, "timeout", FXHeartbeat, OK, TimeoutQueue, "tn", 5100)
	mustPass(t, "a claim without a deadline", CheckTimeouts(b.history()))

	b = &hb{}
	timeoutRun(b, 0, MinTimeouts)
	b.xop(3000+1900, "timeout", FXSubmit, OK, TimeoutQueue, "tt1", 5001)
	mustFail(t, "Submit after the claim was seen ended", CheckTimeouts(b.history()), "tt1")

	b = &hb{}
	timeoutRun(b, 0, MinTimeouts)
	b.xread(20_000, TimeoutQueue, "tt1", "TASK_STATE_COMPLETED")
	mustFail(t, "FAILED, then completed", CheckTimeouts(b.history()), "tt1")

	b = &hb{}
	timeoutRun(b, 0, MinTimeouts-1)
	mustFail(t, "too few timeouts", CheckTimeouts(b.history()), "")
}
