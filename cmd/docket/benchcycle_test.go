package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// Test_BenchCycleCountsItsWarmup: the cycle's producers hold the tasks
// enqueued and not yet completed under its backlog cap (10,000), and the
// warm-up's tasks, which wait in the same queue ahead of the cycle's, are
// among them. The cap used to count the cycle's own tasks alone, so a
// cycle ran behind a second's worth of warm-up tasks more than it said.
func Test_BenchCycleCountsItsWarmup(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	addrs := strings.Join(addrsOf(nodes), ",")
	const producers, batch, backlogCap = 8, 100, 10_000
	// One worker slot: the producers reach the cap within the run.
	out := docket(t, addrs, "bench", "--workload", "cycle", "--queue", "cyc",
		"--producers", strconv.Itoa(producers), "--batch", strconv.Itoa(batch),
		"--workers", "1", "--claim-batch", "1", "--duration", "3s", "--ceiling=false", "--json")
	var rep struct {
		Extra map[string]any `json:"extra"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep); err != nil {
		t.Fatalf("bench report: %v\n%s", err, out)
	}
	if w, _ := rep.Extra["warmup_tasks"].(float64); w == 0 {
		t.Fatalf("the report names no warm-up tasks: %v", rep.Extra)
	}
	var stats struct {
		Queues []map[string]any `json:"queues"`
	}
	s := docket(t, addrs, "stats", "cyc", "--json")
	if err := json.Unmarshal([]byte(s), &stats); err != nil {
		t.Fatalf("stats: %v\n%s", err, s)
	}
	waiting := 0
	for _, q := range stats.Queues {
		for _, f := range []string{"pending", "running"} {
			v, _ := q[f].(string)
			n, _ := strconv.Atoi(v)
			waiting += n
		}
	}
	// Each producer may pass the check at once and add one batch more.
	if limit := backlogCap + producers*batch; waiting == 0 || waiting > limit {
		t.Fatalf("after the cycle %d tasks wait, want 1..%d (warm-up included)\n%s", waiting, limit, s)
	}
}

// Test_BenchDrainClaimsWithItsSubmits: a drain's workers claim each next
// step's tasks with the last step's submits (--submit-claims, the
// default), every task ends completed, and none is left running when the
// run ends; with --submit-claims=false no claim rides on a submit.
func Test_BenchDrainClaimsWithItsSubmits(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	addrs := strings.Join(addrsOf(nodes), ",")
	const n = 3000
	for _, c := range []struct {
		queue, flag string
		rides       bool
	}{{"drain-with", "--submit-claims=true", true}, {"drain-apart", "--submit-claims=false", false}} {
		out := docket(t, addrs, "bench", "--workload", "drain", "--queue", c.queue, "--count", strconv.Itoa(n),
			"-c", "2", "--claim-batch", "50", c.flag, "--duration", "30s", "--ceiling=false", "--json")
		var rep struct {
			Extra map[string]any `json:"extra"`
		}
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep); err != nil {
			t.Fatalf("%s: bench report: %v\n%s", c.flag, err, out)
		}
		rode, _ := rep.Extra["tasks_claimed_with_submits"].(float64)
		if c.rides && rode < n/2 || !c.rides && rode != 0 {
			t.Fatalf("%s: %v of %d tasks claimed with submits", c.flag, rode, n)
		}
		var stats struct {
			Queues []map[string]any `json:"queues"`
		}
		s := docket(t, addrs, "stats", c.queue, "--json")
		if err := json.Unmarshal([]byte(s), &stats); err != nil || len(stats.Queues) != 1 {
			t.Fatalf("%s: stats: %v\n%s", c.flag, err, s)
		}
		q := stats.Queues[0]
		if q["completed"] != strconv.Itoa(n) || q["running"] != nil && q["running"] != "0" || q["pending"] != nil && q["pending"] != "0" {
			t.Fatalf("%s: after the drain %v, want all %d completed", c.flag, q, n)
		}
	}
}
