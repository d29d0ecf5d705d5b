//go:build system

package main

import (
	"context"
	"encoding/json"
	"math"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/dockethq/docket/cmd/docket/bench"
)

// Test_System_BenchPairs: `docket bench --pairs` runs the workload against
// two builds' nodes by turns, each run a cluster of its own, and reports
// every pair as B ÷ A. Both builds are this binary here: what is checked
// is the turns and the arithmetic, not a difference between builds.
func Test_System_BenchPairs(t *testing.T) {
	bin := buildDocket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "bench", "--pairs", "2", "--agent-exe-b", bin, "--base-port", strconv.Itoa(freeBase(t, 3)),
		"--workload", "enqueue", "-c", "4", "--duration", "1s", "--json").Output()
	if err != nil {
		t.Fatalf("bench --pairs: %v\n%s", err, out)
	}
	var rep bench.PairsReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if len(rep.Pairs) != 2 || rep.Pairs[0].BFirst || !rep.Pairs[1].BFirst {
		t.Fatalf("pairs %+v, want 2 with B first in the second", rep.Pairs)
	}
	for _, p := range rep.Pairs {
		for _, r := range []struct{ rate, cpu float64 }{{p.A.Rate, p.A.CPUPer1k}, {p.B.Rate, p.B.CPUPer1k}} {
			if r.rate <= 0 || r.cpu <= 0 {
				t.Fatalf("pair %d: a run without a rate or the servers' CPU: %+v", p.Pair, p)
			}
		}
		if math.Abs(p.RateRatio-p.B.Rate/p.A.Rate) > 1e-9 || math.Abs(p.CPURatio-p.B.CPUPer1k/p.A.CPUPer1k) > 1e-9 {
			t.Fatalf("pair %d: ratios %v and %v are not B/A: %+v", p.Pair, p.RateRatio, p.CPURatio, p)
		}
	}
	if rep.AgentA != bin || rep.AgentB != bin || rep.MedianRateRatio <= 0 {
		t.Fatalf("report %+v", rep)
	}
}
