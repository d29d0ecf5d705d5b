package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/dockethq/docket/fsm"
)

// Test_CLICancelRunning: the README's "Cancelling running work and
// timeouts", verb by verb, text and --json: enqueue --timeout, task shows
// the deadline, cancel of a running task says it was requested, task
// shows the request, and the worker's nack ends it CANCELLED.
func Test_CLICancelRunning(t *testing.T) {
	nodes := startCluster(t, 1, testTune)
	addrs := strings.Join(addrsOf(nodes), ",")
	waitLatched(t, mustClient(t, addrsOf(nodes)...), fsm.LevelCancelRunning)

	id := strings.Fields(docket(t, addrs, "enqueue", "render", "frame 7", "--exec-timeout", "30s"))[0]
	m := regexp.MustCompile(`^(\S+) fence=(\d+) `).FindStringSubmatch(docket(t, addrs, "claim", "render"))
	if m == nil || m[1] != id {
		t.Fatalf("claim: %v, want %s", m, id)
	}
	if s := docket(t, addrs, "task", id); !strings.Contains(s, "timeout:   30s") || !strings.Contains(s, "deadline:  ") || strings.Contains(s, "cancel:") {
		t.Fatalf("task of the running task printed %q", s)
	}
	if s := docket(t, addrs, "cancel", id); !strings.HasPrefix(s, id+" cancel requested") {
		t.Fatalf("cancel of a running task printed %q", s)
	}
	var res struct {
		CancelRequested bool
		State           string
	}
	if err := json.Unmarshal([]byte(docket(t, addrs, "cancel", id, "--json")), &res); err != nil || !res.CancelRequested || res.State != "TASK_STATE_RUNNING" {
		t.Fatalf("second cancel --json: %+v %v", res, err)
	}
	if s := docket(t, addrs, "task", id); !strings.Contains(s, "cancel:    requested at ") {
		t.Fatalf("task after the cancel printed %q", s)
	}
	if s := docket(t, addrs, "nack", id, m[2], "--reason", "stopped"); strings.TrimSpace(s) != "CANCELLED" {
		t.Fatalf("the worker's nack printed %q", s)
	}
	if s := docket(t, addrs, "task", id); !strings.Contains(s, "state:     CANCELLED") || !strings.Contains(s, "#1 CANCELLED") {
		t.Fatalf("task after the nack printed %q", s)
	}
}
