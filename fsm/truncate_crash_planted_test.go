//go:build plantedbugs

package fsm

import (
	"sort"
	"testing"
)

// Test_PlantedNoFlushBeforeTruncate: with Persist's flush removed, every
// crash point of Test_CrashNeverLosesTheLogAbovePebble loses entries
// that the compacted log no longer holds, and the test says so.
func Test_PlantedNoFlushBeforeTruncate(t *testing.T) {
	plant(t, PlantNoFlushBeforeTruncate)
	runs := crashRuns(t, 0)
	names := make([]string, 0, len(runs))
	for name := range runs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := runs[name]; err == nil {
			t.Errorf("%s: recovered although Persist did not flush", name)
		} else {
			t.Logf("%s: caught: %v", name, err)
		}
	}
}

// Test_PlantedSnapshotSkipsWindow: with Snapshot leaving the checkpoint
// window out, the crash runs with windows lose entries the compacted log
// no longer holds, and the test says so.
func Test_PlantedSnapshotSkipsWindow(t *testing.T) {
	plant(t, PlantSnapshotSkipsWindow)
	caught := 0
	for name, err := range crashRuns(t, 64) {
		if err != nil {
			caught++
			t.Logf("%s: caught: %v", name, err)
		}
	}
	if caught == 0 {
		t.Error("no crash run failed although Snapshot left the window out")
	}
}
