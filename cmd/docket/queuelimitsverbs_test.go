package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
)

// waitClusterLevel waits until every node latched level: the leader
// latches it shortly after it is elected, and a command of that level
// sent before is refused FEATURE_DISABLED.
func waitClusterLevel(t *testing.T, nodes []*sysNode, level uint32) {
	t.Helper()
	testwait.For(t, 10*time.Second, "the feature level latched", func() bool {
		for _, n := range nodes {
			if n.node.FSM().EnabledLevel() < level {
				return false
			}
		}
		return true
	})
}

// Test_CLIQueueLimits: `docket queue limit` as the README tour runs it,
// the limit at claim, and stats and queues showing it, text and --json.
func Test_CLIQueueLimits(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	addrs := strings.Join(addrsOf(nodes), ",")
	waitClusterLevel(t, nodes, fsm.LevelLimits)
	for range 3 {
		docket(t, addrs, "enqueue", "jobs", "x")
	}
	if s := docket(t, addrs, "queue", "limit", "jobs", "--concurrency", "2", "--rate", "30/m", "--burst", "5"); strings.TrimSpace(s) != "jobs/default: concurrency 2, rate 0.5/s, burst 5" {
		t.Fatalf("limit printed %q", s)
	}
	if s := docket(t, addrs, "queue", "limit", "jobs", "--concurrency", "2", "--json"); strings.TrimSpace(s) != "{}" {
		t.Fatalf("the same limit --json printed %q, want unchanged", s)
	}
	docket(t, addrs, "claim", "jobs")
	docket(t, addrs, "claim", "jobs")
	if s := docket(t, addrs, "claim", "jobs"); strings.TrimSpace(s) != "no task" {
		t.Fatalf("a claim over the concurrency limit printed %q", s)
	}
	if out := docket(t, addrs, "queues"); !regexp.MustCompile(`(?m)^jobs\s+default\s+active\s+1\s+0\s+0\s+2\s+0\s+0\s+running 2/2, rate 0.5/s tokens 3(\.\d+)?/5$`).MatchString(out) {
		t.Fatalf("queues printed %q", out)
	}
	// Tokens refill as the cluster's time goes on: 3 of 5 left, and more.
	if s := docket(t, addrs, "stats", "jobs"); !regexp.MustCompile(` running 2/2, rate 0.5/s tokens 3(\.\d+)?/5\n`).MatchString(s) {
		t.Fatalf("stats printed %q", s)
	}
	var st struct {
		Queues []struct {
			MaxRunning  uint32 `json:"maxRunning"`
			RateMilli   string `json:"rateMilli"`
			TokensMilli string `json:"tokensMilli"`
		}
	}
	if err := json.Unmarshal([]byte(docket(t, addrs, "stats", "jobs", "--json")), &st); err != nil || len(st.Queues) != 1 ||
		st.Queues[0].MaxRunning != 2 || st.Queues[0].RateMilli != "500" || !strings.HasPrefix(st.Queues[0].TokensMilli, "3") || len(st.Queues[0].TokensMilli) != 4 {
		t.Fatalf("stats --json: %+v %v", st, err)
	}
	if s := docket(t, addrs, "queue", "limit", "--tenant-wide", "--concurrency", "4"); strings.TrimSpace(s) != "tenant default: concurrency 4" {
		t.Fatalf("tenant limit printed %q", s)
	}
	if s := docket(t, addrs, "stats", "jobs"); !strings.Contains(s, "tenant running 2/4") {
		t.Fatalf("stats after the tenant limit printed %q", s)
	}
	if s := docket(t, addrs, "queue", "limit", "jobs", "--clear"); strings.TrimSpace(s) != "jobs/default: concurrency none, rate none" {
		t.Fatalf("clear printed %q", s)
	}
	if s := docket(t, addrs, "claim", "jobs"); strings.TrimSpace(s) == "no task" {
		t.Fatal("a claim after clearing took nothing")
	}
}

func Test_ParseRate(t *testing.T) {
	for in, want := range map[string]uint64{"5/s": 5000, "0.5/s": 500, "30/m": 500, "36/h": 10, "2": 2000, "0": 0, "1000000/s": 1e9} {
		if got, err := parseRate(in); err != nil || got != want {
			t.Errorf("parseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"5/d", "x/s", "-1/s", "0.0001/h", "2000000/s", "NaN"} {
		if got, err := parseRate(in); err == nil {
			t.Errorf("parseRate(%q) = %d, want an error", in, got)
		}
	}
}
