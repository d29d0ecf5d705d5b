package jepsen

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fairClaim adds an acknowledged claim of the fair queue's task of key.
func (b *hb) fairClaim(t int64, proc, key, task string, fence uint64) {
	b.add(t, proc, FXClaim, OK, Event{Task: task, Fence: fence, Queue: FairQueue, Key: fairIdem("", key, int(fence)), Lease: int64(2 * time.Second)})
}

// fairRun sets the per-key rule and runs rounds: each enqueues a quiet
// task, then two overlapping claims take noisy tasks (the noisy key at
// its limit), then a claim takes the quiet task; all are submitted.
func fairRun(b *hb, at int64, rounds int) {
	b.add(at, "fair-admin", FKeyLimitSet, OK, Event{Queue: FairQueue, Key: fmt.Sprint(FairKeyMax)})
	for i := range rounds {
		t0, f := at+10+int64(i)*300, uint64(1000+10*i)
		q, key := fmt.Sprintf("q%d", i), fmt.Sprintf("quiet%d", i%fairQuietKeys)
		b.add(t0, "fair", FXEnqueue, OK, Event{Queue: FairQueue, Task: q, Key: fairIdem("", key, i)})
		b.fairClaim(t0+10, "fair-w0", fairNoisy, fmt.Sprintf("na%d", i), f)
		b.fairClaim(t0+20, "fair-w1", fairNoisy, fmt.Sprintf("nb%d", i), f+1)
		b.fairClaim(t0+40, "fair-w2", key, q, f+2)
		b.xop(t0+200, "fair-w0", FXSubmit, OK, FairQueue, fmt.Sprintf("na%d", i), f)
		b.xop(t0+210, "fair-w1", FXSubmit, OK, FairQueue, fmt.Sprintf("nb%d", i), f+1)
		b.xop(t0+220, "fair-w2", FXSubmit, OK, FairQueue, q, f+2)
	}
}

// Test_CheckKeyLimits: spans of one key at the per-key limit pass, a
// third one of the noisy key fails, spans of different keys never add up,
// and a run without the fair workload passes with a note.
func Test_CheckKeyLimits(t *testing.T) {
	b := &hb{}
	fairRun(b, 0, 12)
	r := CheckKeyLimits(b.history())
	mustPass(t, "rounds at the limit", r)
	if r.Checked != 36 || r.Note != "per-key limit 2: 36 spans, the noisy key at the limit 12 times, peak 2" {
		t.Fatalf("counts: %d %q", r.Checked, r.Note)
	}

	b = &hb{}
	fairRun(b, 0, 12)
	b.fairClaim(10+5*300+30, "fair-w3", fairNoisy, "nc", 5000) // a third noisy task in round 5
	b.xop(10+5*300+100, "fair-w3", FXSubmit, OK, FairQueue, "nc", 5000)
	mustFail(t, "three of one key under a per-key limit of two", CheckKeyLimits(b.history()), "nc")

	b = &hb{}
	fairRun(b, 0, 12)
	b.fairClaim(10+5*300+30, "fair-w3", "quiet3", "other", 5000) // a second key's task: no overlap of one key
	b.xop(10+5*300+100, "fair-w3", FXSubmit, OK, FairQueue, "other", 5000)
	mustPass(t, "three running of two keys", CheckKeyLimits(b.history()))

	b = &hb{}
	fairRun(b, 0, 12)
	b.evs = b.evs[2:] // the rule's set: tried, never acknowledged
	b.add(0, "fair-admin", FKeyLimitSet, Fail, Event{Queue: FairQueue})
	mustFail(t, "rule never acknowledged", CheckKeyLimits(b.history()), "")

	b = &hb{}
	limitRun(b, 0, 12)
	if r := CheckKeyLimits(b.history()); r.Verdict != Pass || !strings.Contains(r.Note, "--fair") {
		t.Fatalf("without the fair workload: %s %q", r.Verdict, r.Note)
	}
}

// Test_CheckFairness: a quiet task claimed after two noisy claims passes;
// one that waited behind more fails; a window with a claim of unknown
// outcome, where the quiet key held another task, or whose task a claim
// the history does not show took first (the long run of 2026-11-28), is
// skipped; too few
// judged windows fail; no fair workload passes with a note.
func Test_CheckFairness(t *testing.T) {
	b := &hb{}
	fairRun(b, 0, 20)
	r := CheckFairness(b.history())
	mustPass(t, "two noisy claims per quiet wait", r)
	if r.Checked != 20 || !strings.Contains(r.Note, "20 quiet tasks judged, 0 skipped") || !strings.Contains(r.Note, "worst 2") {
		t.Fatalf("counts: %d %q", r.Checked, r.Note)
	}

	behind := func(extra string) *hb {
		b := &hb{}
		fairRun(b, 0, 40)       // rounds of 300 ms: an unknown claim's 5 s cover 17 of them
		t0 := int64(10 + 7*300) // round 7: q7 waits from t0+1 to t0+40
		for i, at := range []int64{t0 + 25, t0 + 30, t0 + 35} {
			typ := OK
			if extra == "info" && i == 0 {
				typ = Info
			}
			b.add(at, fmt.Sprintf("fair-w%d", 4+i), FXClaim, typ, Event{Task: fmt.Sprintf("nx%d", i), Fence: uint64(6000 + i),
				Queue: FairQueue, Key: fairIdem("", fairNoisy, 6000+i), Lease: int64(2 * time.Second)})
		}
		if extra == "held" {
			b.fairClaim(10+7*300-100, "fair-w7", "quiet3", "prev", 7000) // quiet3's last task still held
		}
		if extra == "ghost" {
			// The claim that took q7 says it was its second: a resent
			// Claim's lost first attempt held it meanwhile.
			for i := range b.evs {
				if e := &b.evs[i]; e.F == FXClaim && e.Type == OK && e.Task == "q7" {
					e.Claims = 2
				}
			}
		}
		return b
	}
	mustFail(t, "a quiet task behind five noisy claims", CheckFairness(behind("").history()), "q7")
	r = CheckFairness(behind("info").history())
	mustPass(t, "the same with a claim of unknown outcome in the window", r)
	if !strings.Contains(r.Note, "17 skipped") {
		t.Fatalf("the unknown claim's window was judged: %q", r.Note)
	}
	r = CheckFairness(behind("held").history())
	mustPass(t, "the same while the quiet key held another task", r)
	r = CheckFairness(behind("ghost").history())
	mustPass(t, "the same when a claim the history does not show took q7 first", r)
	if !strings.Contains(r.Note, "1 first taken by a claim whose answer was lost") {
		t.Fatalf("the resent claim's task was judged: %q", r.Note)
	}

	b = &hb{}
	fairRun(b, 0, MinFairJudged-1)
	mustFail(t, "too few quiet tasks", CheckFairness(b.history()), "")
	b = &hb{}
	limitRun(b, 0, 12)
	if r := CheckFairness(b.history()); r.Verdict != Pass || !strings.Contains(r.Note, "--fair") {
		t.Fatalf("without the fair workload: %s %q", r.Verdict, r.Note)
	}
}

func Test_FairKeyOf(t *testing.T) {
	for idem, want := range map[string]string{fairIdem("p1-", "quiet2", 7): "quiet2", fairIdem("", fairNoisy, 0): fairNoisy, "w1-17": ""} {
		if got := fairKeyOf(idem); got != want {
			t.Errorf("fairKeyOf(%q) = %q, want %q", idem, got, want)
		}
	}
}
