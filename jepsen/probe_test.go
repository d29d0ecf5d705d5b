package jepsen

import "testing"

// Test_ProbeBeforeFollowsTheOlderLevel: the gate probe's command needs
// ProbeLevel, so before a rolling upgrade it is refused only by an older
// build below that level. A run upgrading from level 17 to 18 (a level
// with no new command) reported the accepted probe as a finding.
func Test_ProbeBeforeFollowsTheOlderLevel(t *testing.T) {
	for _, c := range []struct {
		enabled uint32
		want    string
	}{
		{3, ProbeRefused},
		{ProbeLevel - 1, ProbeRefused},
		{ProbeLevel, ProbeAccepted},
		{17, ProbeAccepted},
	} {
		if got := ProbeBefore(c.enabled); got != c.want {
			t.Errorf("ProbeBefore(%d) = %q, want %q", c.enabled, got, c.want)
		}
	}
}
