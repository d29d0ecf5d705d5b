//go:build system

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dockethq/docket/fsm"
)

// Test_SystemPauseSurvivesLeaderKill is issue 14's black-box check of
// queue control: three agents of the built binary, driven by the built
// binary's own verbs. A task is enqueued, its queue paused, and the
// leader's process killed (SIGKILL): on the new leader a claim gets
// nothing, also after waiting, and `docket queues` says paused; after
// `docket queue resume` the claim gets the task.
func Test_SystemPauseSurvivesLeaderKill(t *testing.T) {
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
	// cli runs the built binary's verb against addrs and returns stdout.
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
	waitFor(t, 60*time.Second, "a leader with queue control latched", func() bool {
		st := statusOf(grpcs)
		return st.LeaderID != "" && st.EnabledFeatureLevel >= fsm.LevelQueueControl
	})

	id := strings.Fields(must(grpcs, "enqueue", "jobs", "resize image 42"))[0]
	if out := must(grpcs, "queue", "pause", "jobs"); !strings.Contains(out, "paused") {
		t.Fatalf("pause printed %q", out)
	}
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

	if out := must(rest, "claim", "jobs"); strings.TrimSpace(out) != "no task" {
		t.Fatalf("claim on the new leader printed %q, want no task", out)
	}
	start := time.Now()
	if out := must(rest, "claim", "jobs", "--wait", "2s"); strings.TrimSpace(out) != "no task" {
		t.Fatalf("long-poll claim on the new leader printed %q, want no task", out)
	}
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Fatalf("long-poll claim of a paused queue answered after %v; it should wait", took)
	}
	var listed struct {
		Queues []struct {
			Queue   string
			Paused  bool
			Pending string
		}
	}
	if err := json.Unmarshal([]byte(must(rest, "queues", "--json")), &listed); err != nil ||
		len(listed.Queues) != 1 || !listed.Queues[0].Paused || listed.Queues[0].Pending != "1" {
		t.Fatalf("queues on the new leader: %+v %v", listed, err)
	}

	if out := must(rest, "queue", "resume", "jobs"); !strings.Contains(out, "resumed") {
		t.Fatalf("resume printed %q", out)
	}
	if out := must(rest, "claim", "jobs"); !strings.HasPrefix(out, id+" ") {
		t.Fatalf("claim after resume printed %q, want task %s", out, id)
	}
}
