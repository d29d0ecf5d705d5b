package jepsen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Test_PlantedVerdict: the fault-free case passes only when every checker
// passed; a fault's case passes only when each checker it names failed.
func Test_PlantedVerdict(t *testing.T) {
	pass := []Result{{Name: "lost", Verdict: Pass}, {Name: "completed", Verdict: Pass}}
	lost := []Result{{Name: "lost", Verdict: Violate}, {Name: "completed", Verdict: Pass}}
	none, ack := PlantedCases[0], PlantedCase{Plant: PlantAckBeforeCommit, Catch: []string{"lost"}}
	if err := PlantedVerdict(none, pass); err != nil {
		t.Errorf("fault-free case, all passed: %v", err)
	}
	if err := PlantedVerdict(none, lost); err == nil || !strings.Contains(err.Error(), "lost") {
		t.Errorf("fault-free case with a failed checker: %v", err)
	}
	if err := PlantedVerdict(ack, lost); err != nil {
		t.Errorf("planted fault caught: %v", err)
	}
	if err := PlantedVerdict(ack, pass); err == nil || !strings.Contains(err.Error(), "not caught by lost") {
		t.Errorf("planted fault missed: %v", err)
	}
	for _, c := range PlantedCases[1:] {
		if len(c.Catch) == 0 {
			t.Errorf("planted %s names no checker", c.Plant)
		}
	}
}

// Test_CheckPlantedBinaries: a release binary holding a fault's name or
// DOCKET_PLANT fails the check, and so does a planted one lacking one.
func Test_CheckPlantedBinaries(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	all := strings.Join(append(PlantedFaults(), PlantEnv), " ")
	rel, pl := write("release", "docket agent"), write("planted", all)
	if err := CheckPlantedBinaries(rel, pl); err != nil {
		t.Fatalf("clean release and full planted build: %v", err)
	}
	if err := CheckPlantedBinaries(write("leaky", "x "+PlantReaperOnFollowers+" y"), pl); err == nil || !strings.Contains(err.Error(), "holds "+PlantReaperOnFollowers) {
		t.Errorf("a release build holding a fault passed: %v", err)
	}
	short := write("short", strings.Replace(all, PlantRequeueForgetsTask, "", 1))
	if err := CheckPlantedBinaries(rel, short); err == nil || !strings.Contains(err.Error(), "lacks "+PlantRequeueForgetsTask) {
		t.Errorf("a planted build lacking a fault passed: %v", err)
	}
}
