//go:build system

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dockethq/docket/fsm"
)

// Test_SystemDAGRunsInOrder is issue 14's black-box check of task
// dependencies: three agents of the built binary, driven by its verbs. A
// 3-level DAG goes in with `docket dag enqueue`; the leader is killed
// (SIGKILL) before any of it runs; then a worker loop claims up to ten
// tasks at a time and records the order in which it started them: no task
// starts before every parent completed, and all of them run. A second DAG
// whose root fails ends with its children and grandchild cancelled.
func Test_SystemDAGRunsInOrder(t *testing.T) {
	bin := buildDocket(t)
	dir := t.TempDir()
	type node struct {
		id, grpc string
		proc     *childProc
	}
	var nodes []*node
	var grpcs, gossips []string
	for i := 1; i <= 3; i++ {
		n := &node{id: fmt.Sprintf("n%d", i), grpc: freeAddr(t)}
		nodes = append(nodes, n)
		grpcs, gossips = append(grpcs, n.grpc), append(gossips, freeAddr(t))
	}
	for i, n := range nodes {
		n.proc = startLimitedAgent(t, bin, 4096, filepath.Join(dir, n.id+".log"),
			"agent", "--id", n.id, "--data-dir", filepath.Join(dir, n.id), "--grpc-addr", n.grpc,
			"--raft-addr", freeAddr(t), "--gossip-addr", gossips[i], "--gossip-local",
			"--bootstrap-expect", "3", "--join", strings.Join(gossips, ","))
	}
	cli := func(addrs []string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		full := append([]string{args[0], "--addr", strings.Join(addrs, ","), "--timeout", "20s"}, args[1:]...)
		out, err := exec.CommandContext(ctx, bin, full...).Output()
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return string(out), err
	}
	must := func(addrs []string, args ...string) string {
		t.Helper()
		out, err := cli(addrs, args...)
		if err != nil {
			t.Fatalf("docket %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	type status struct {
		LeaderID            string `json:"leaderId"`
		EnabledFeatureLevel uint32 `json:"enabledFeatureLevel"`
	}
	statusOf := func(addrs []string) status {
		var st status
		if out, err := cli(addrs, "cluster", "status", "--json"); err == nil {
			_ = json.Unmarshal([]byte(out), &st)
		}
		return st
	}
	waitFor(t, 60*time.Second, "a leader with dependencies latched", func() bool {
		st := statusOf(grpcs)
		return st.LeaderID != "" && st.EnabledFeatureLevel >= fsm.LevelDependencies
	})

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
	leader := statusOf(grpcs).LeaderID
	var rest []string
	for _, n := range nodes {
		if n.id == leader {
			if err := n.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			select {
			case <-n.proc.done:
				n.proc.gone = true
			case <-time.After(10 * time.Second):
				t.Fatalf("%s survived SIGKILL", n.id)
			}
			continue
		}
		rest = append(rest, n.grpc)
	}
	if len(rest) != 2 {
		t.Fatalf("leader %q is none of the nodes", leader)
	}
	waitFor(t, 30*time.Second, "a new leader among the survivors", func() bool {
		st := statusOf(rest)
		return st.LeaderID != "" && st.LeaderID != leader
	})

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
