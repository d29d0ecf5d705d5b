//go:build system && plantedbugs

package fsm

import "testing"

// Test_SystemPlantedKillNineNoFlushBeforeTruncate: with Persist's flush
// removed in the child, every kill of
// Test_SystemKillNineKeepsTheLogAbovePebble loses entries the compacted
// log no longer holds.
func Test_SystemPlantedKillNineNoFlushBeforeTruncate(t *testing.T) {
	for i, err := range killRuns(t, []string{"DOCKET_PLANT=" + PlantNoFlushBeforeTruncate}) {
		if err == nil {
			t.Errorf("kill %d: recovered although Persist did not flush", i)
		} else {
			t.Logf("caught: %v", err)
		}
	}
}
