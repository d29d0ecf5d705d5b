package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// Test_BenchCeilingInThreeProcesses: `docket bench --workload ceiling
// --procs 3 --groups 2` runs the ceiling's servers as three child
// processes hosting two groups each, and every group's writes commit.
func Test_BenchCeilingInThreeProcesses(t *testing.T) {
	t.Setenv(envRunMain, "1") // the children are this test binary acting as docket
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	args := []string{"--workload", "ceiling", "--procs", "3", "--groups", "2", "-c", "4", "--count", "300", "--duration", "5s", "--log-store", "wal", "--json"}
	if err := runBench(ctx, args, &out, &errOut); err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut.String())
	}
	n, e := benchOps(t, out.String())
	if n < 100 || e != 0 {
		t.Fatalf("ceiling in three processes: %d ok, %d errors\n%s\n%s", n, e, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "procs=3 groups=2") || !strings.Contains(out.String(), `"log_store": "wal"`) {
		t.Fatalf("report does not name its shape:\n%s", out.String())
	}
}
