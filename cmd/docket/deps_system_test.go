//go:build system

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/fsm"
)

// Test_SystemDAGRunsInOrder is the black-box check of task
// dependencies: three agents of the built binary, driven by its verbs. A
// 3-level DAG goes in with `docket dag enqueue`; the leader is killed
// (SIGKILL) before any of it runs; then a worker loop claims up to ten
// tasks at a time and records the order in which it started them: no task
// starts before every parent completed, and all of them run. A second DAG
// whose root fails ends with its children and grandchild cancelled.
func Test_SystemDAGRunsInOrder(t *testing.T) {
	ac := startAgentCluster(t, fsm.LevelDependencies)
	grpcs, dir, must := ac.grpcs, ac.dir, ac.must

	// extract-a, extract-b -> join (both), clean (a) -> report (join, clean).
	parents := map[string][]string{
		"extract-a": nil, "extract-b": nil,
		"join": {"extract-a", "extract-b"}, "clean": {"extract-a"},
		"report": {"join", "clean"},
	}
	file := filepath.Join(dir, "etl.json")
	var tasks []string
	for _, name := range []string{"report", "join", "clean", "extract-a", "extract-b"} { // out of order on purpose
		after, _ := json.Marshal(parents[name])
		tasks = append(tasks, fmt.Sprintf(`{"name": %q, "payload": %q, "after": %s}`, name, name, after))
	}
	if err := os.WriteFile(file, []byte(`{"queue": "etl", "tasks": [`+strings.Join(tasks, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var sent struct{ Tasks []dagEnqueued }
	if err := json.Unmarshal([]byte(must(grpcs, "dag", "enqueue", file, "--json")), &sent); err != nil || len(sent.Tasks) != 5 {
		t.Fatalf("dag enqueue: %+v %v", sent, err)
	}
	nameOf := map[string]string{}
	for _, e := range sent.Tasks {
		nameOf[e.ID] = e.Name
	}

	// Kill the leader: the waits are replicated state.
	_, rest := ac.killLeader()

	// The worker loop: claim what is claimable, start (record) each, then
	// complete each. Bounded in rounds and time.
	claimed := regexp.MustCompile(`(?m)^(\S+) fence=(\d+) `)
	completed := map[string]bool{}
	var order []string
	deadline := time.Now().Add(60 * time.Second)
	for len(completed) < len(parents) && time.Now().Before(deadline) {
		out := must(rest, "claim", "etl", "--n", "10", "--wait", "2s")
		for _, m := range claimed.FindAllStringSubmatch(out, -1) {
			name := nameOf[m[1]]
			for _, p := range parents[name] {
				if !completed[p] {
					t.Fatalf("%s started before its parent %s completed (order so far %v)", name, p, order)
				}
			}
			order = append(order, name)
		}
		for _, m := range claimed.FindAllStringSubmatch(out, -1) {
			must(rest, "submit", m[1], m[2], "done-"+nameOf[m[1]])
			completed[nameOf[m[1]]] = true
		}
	}
	if len(order) != len(parents) {
		t.Fatalf("ran %v, want all %d tasks", order, len(parents))
	}
	if order[len(order)-1] != "report" {
		t.Fatalf("report ran before the end: %v", order)
	}

	// A failed root cancels its child and grandchild.
	root := strings.Fields(must(rest, "enqueue", "bad", "root"))[0]
	child := strings.Fields(must(rest, "enqueue", "bad", "child", "--after", root))[0]
	grand := strings.Fields(must(rest, "enqueue", "bad", "grandchild", "--after", child))[0]
	m := claimed.FindStringSubmatch(must(rest, "claim", "bad", "--n", "10"))
	if m == nil || m[1] != root {
		t.Fatalf("claim of the failing DAG: %v, want only %s", m, root)
	}
	must(rest, "submit", root, m[2], "--failed", "--error", "boom")
	for _, id := range []string{child, grand} {
		var tk struct{ State, LastError string }
		if err := json.Unmarshal([]byte(must(rest, "task", id, "--json")), &tk); err != nil ||
			tk.State != "TASK_STATE_CANCELLED" || !strings.Contains(tk.LastError, "ended") {
			t.Fatalf("task %s after its root failed: %+v %v", id, tk, err)
		}
	}
	if out := must(rest, "claim", "bad", "--n", "10"); strings.TrimSpace(out) != "no task" {
		t.Fatalf("claim after the failure printed %q", out)
	}
}
