package check

import (
	"testing"
	"time"
)

// Periodic checks hash at most a tenth of the time: after a long check
// the next waits nine times its length; a short one leaves CheckInterval.
func Test_NextCheckWaitBoundsHashingTime(t *testing.T) {
	for _, c := range []struct {
		interval, took, want time.Duration
	}{
		{time.Minute, 2 * time.Second, time.Minute},
		{time.Minute, 6 * time.Second, time.Minute},
		{time.Minute, 20 * time.Second, 180 * time.Second},
		{time.Minute, 48 * time.Second, 432 * time.Second}, // a million tasks at 8 MiB/s
		{time.Second, 10 * time.Second, 90 * time.Second},
		{time.Hour, 5 * time.Minute, time.Hour},
		{time.Hour, 10 * time.Minute, 90 * time.Minute},
	} {
		got := nextCheckWait(c.interval, c.took)
		if got != c.want {
			t.Errorf("interval %v, check took %v: next in %v, want %v", c.interval, c.took, got, c.want)
		}
		if share := float64(c.took) / float64(c.took+got); share > 0.10 {
			t.Errorf("interval %v, check took %v: hashing %.0f%% of the time", c.interval, c.took, 100*share)
		}
	}
}

// What a check arriving at a voter does to the hash under way: only a
// paced hash gives way, and only to an urgent check. A full-speed hash (an
// urgent check's, or a restarted voter's that awaits a check) finishes
// whatever comes, or a slow restarted voter poked into urgent checks back
// to back would never complete one.
func Test_HashAdmission(t *testing.T) {
	for _, c := range []struct {
		name                         string
		hashing, runningFull, urgent bool
		wantStart, wantReplace       bool
	}{
		{"idle, periodic check", false, false, false, true, false},
		{"idle, urgent check", false, false, true, true, false},
		{"paced hash running, periodic check", true, false, false, false, false},
		{"paced hash running, urgent check", true, false, true, true, true},
		{"full-speed hash running, periodic check", true, true, false, false, false},
		{"full-speed hash running, urgent check", true, true, true, false, false},
	} {
		start, replace := hashAdmission(c.hashing, c.runningFull, c.urgent)
		if start != c.wantStart || replace != c.wantReplace {
			t.Errorf("%s: start %v replace %v, want %v %v", c.name, start, replace, c.wantStart, c.wantReplace)
		}
	}
}
