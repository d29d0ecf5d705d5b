//go:build system

package jepsen

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The release build holds no planted code: built without the plantedbugs
// tag, docket contains neither a planted fault's name nor DOCKET_PLANT
// (the compiler dropped every hook), while the tagged build holds them
// all, so the names here agree with fsm's, cluster's and transport's.
func Test_System_ReleaseBuildHasNoPlantedFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	build := func(out string, tags ...string) string {
		p := filepath.Join(dir, out)
		args := append([]string{"build"}, tags...)
		cmd := exec.CommandContext(ctx, "go", append(args, "-o", p, "github.com/dockethq/docket/cmd/docket")...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", tags, err, b)
		}
		return p
	}
	rel, pl := build("docket"), build("docket-planted", "-tags", "plantedbugs")
	if err := CheckPlantedBinaries(rel, pl); err != nil {
		t.Fatal(err)
	}
}
