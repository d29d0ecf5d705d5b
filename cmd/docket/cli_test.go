package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// docket runs one CLI invocation against addrs and returns its stdout.
func docket(t *testing.T, addrs string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	full := append([]string{args[0], "--addr", addrs}, args[1:]...)
	if err := run(ctx, full, &out, &errb); err != nil {
		t.Fatalf("docket %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// The README's one-minute tour, verb by verb.
func Test_CLITour(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	addrs := strings.Join(addrsOf(nodes), ",")

	first := docket(t, addrs, "enqueue", "jobs", "resize image 42")
	if !strings.Contains(first, "PENDING") {
		t.Fatalf("enqueue printed %q", first)
	}
	docket(t, addrs, "enqueue", "jobs", "urgent", "--priority", "9")
	if s := docket(t, addrs, "stats"); !regexp.MustCompile(`jobs\s+default\s+active\s+2\s`).MatchString(s) {
		t.Fatalf("stats printed %q", s)
	}
	claim := docket(t, addrs, "claim", "jobs")
	m := regexp.MustCompile(`^(\S+) fence=(\d+) attempt=1 payload="urgent"`).FindStringSubmatch(claim)
	if m == nil {
		t.Fatalf("claim printed %q, want the priority-9 task", claim)
	}
	id, fence := m[1], m[2]
	if s := docket(t, addrs, "submit", id, fence, "done"); strings.TrimSpace(s) != "submitted" {
		t.Fatalf("submit printed %q", s)
	}
	if s := docket(t, addrs, "submit", id, fence, "done"); strings.TrimSpace(s) != "already submitted" {
		t.Fatalf("second submit printed %q", s)
	}
	task := docket(t, addrs, "task", id)
	if !strings.Contains(task, "COMPLETED") || !strings.Contains(task, `"done"`) {
		t.Fatalf("task printed %q", task)
	}
	if s := docket(t, addrs, "cluster", "status"); strings.Count(s, "voter") != 3 || !strings.Contains(s, "*") {
		t.Fatalf("cluster status printed %q", s)
	}
	// Issue 12: each server's health and level, and the failure tolerance.
	var last string
	testwait.For(t, 10*time.Second, "every server alive in gossip", func() bool {
		last = docket(t, addrs, "cluster", "status")
		return strings.Count(last, " alive ") == 3 && strings.Contains(last, "failure tolerance: 1 ") &&
			strings.Count(last, fmt.Sprintf(" level %d ", fsm.FeatureLevel)) == 3 &&
			strings.Contains(last, "cluster id: ") // the cluster named itself
	})
	if s := docket(t, addrs, "stats", "--json"); !strings.Contains(s, `"completed":"1"`) {
		t.Fatalf("stats --json printed %q", s)
	}
	if s := docket(t, addrs, "dlq", "list", "jobs"); strings.Count(s, "\n") != 1 || !strings.HasPrefix(s, "ID ") {
		t.Fatalf("dlq list printed %q for an empty dead-letter queue", s)
	}
	// The repair procedure's first steps (README, "Corruption"): stop the
	// node, then remove it (a live one would gossip its way back in).
	victim := nodes[2].id
	nodes[2].stop()
	if s := docket(t, addrs, "cluster", "remove", victim); strings.TrimSpace(s) != "removed "+victim {
		t.Fatalf("cluster remove printed %q", s)
	}
	if s := docket(t, addrs, "cluster", "status"); strings.Count(s, "voter") != 2 || strings.Contains(s, " "+victim+" ") {
		t.Fatalf("cluster status after removing %s printed %q", victim, s)
	}
}

func Test_CLIUsageErrors(t *testing.T) {
	cases := [][]string{{}, {"nope"}, {"submit", "id"}, {"submit", "id", "notanumber"}, {"dlq"}, {"cluster", "reboot"}, {"cluster", "remove"}}
	for _, args := range cases {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, &out, &errb)
		if err == nil || exitCode(err) != 2 {
			t.Fatalf("docket %v: err %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
}

func Test_VersionNamesTheFeatureLevel(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^docket \S+, feature level \d+\n$`).MatchString(out.String()) {
		t.Fatalf("version printed %q", out.String())
	}
}

// Test_CLITaskShowsAttempts: `docket task ID` lists the task's attempts,
// one line each with its worker and how it ended, and --json carries the
// history; with auth off an ended attempt's fence is shown, the running
// one's never.
func Test_CLITaskShowsAttempts(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	addrs := strings.Join(addrsOf(nodes), ",")
	testwait.For(t, 10*time.Second, "the attempts level latched", func() bool {
		return nodes[0].node.FSM().EnabledLevel() >= fsm.LevelAttempts
	})
	docket(t, addrs, "enqueue", "jobs", "x")
	claimed := regexp.MustCompile(`^(\S+) fence=(\d+) `)
	m := claimed.FindStringSubmatch(docket(t, addrs, "claim", "jobs", "--worker", "w-one"))
	if m == nil {
		t.Fatal("claim printed no task")
	}
	id, first := m[1], m[2]
	docket(t, addrs, "nack", id, first, "--reason", "out of memory")
	m = claimed.FindStringSubmatch(docket(t, addrs, "claim", "jobs", "--worker", "w-two"))
	if m == nil || m[1] != id {
		t.Fatalf("second claim: %v", m)
	}
	second := m[2]
	// The worker's last checkpoint, from a heartbeat, shows too.
	fence, err := strconv.ParseUint(second, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	res, err := mustClient(t, addrsOf(nodes)...).Heartbeat(testCtx(t), &pb.HeartbeatItem{TaskId: id, Fence: fence, Progress: []byte("page 7 of 9"), HasProgress: true})
	if err != nil || len(res) != 1 || res[0].GetCode() != pb.Code_CODE_OK {
		t.Fatalf("heartbeat with progress: %v %v", res, err)
	}
	out := docket(t, addrs, "task", id)
	if !strings.Contains(out, `progress:  "page 7 of 9"`) {
		t.Errorf("task printed no progress:\n%s", out)
	}
	for _, want := range []string{
		"#1 NACKED worker=w-one ", " fence=" + first + ` error="out of memory"`,
		"#2 RUNNING worker=w-two ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("task printed no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "fence="+second) {
		t.Errorf("task printed the running attempt's fence %s:\n%s", second, out)
	}
	docket(t, addrs, "submit", id, second, "done")
	if out := docket(t, addrs, "task", id); !strings.Contains(out, "#2 COMPLETED worker=w-two ") {
		t.Errorf("task after the submit:\n%s", out)
	}
	if js := docket(t, addrs, "task", id, "--json"); !strings.Contains(js, `"history":[`) || !strings.Contains(js, `"outcome":"ATTEMPT_OUTCOME_COMPLETED"`) {
		t.Errorf("task --json carries no history:\n%s", js)
	}
}
