//go:build system

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dockethq/docket/fsm"
)

// Test_SystemScheduleOncePerSlotAcrossLeaderKills is issue 14's black-box
// check of recurring tasks: three agents of the built binary, driven by
// its own verbs. A schedule at @every 1s with catch-up fires while the
// leader's process is killed (SIGKILL) and restarted, twice. Then every
// task of its queue is claimed: no slot holds two tasks, and no slot
// between the first and the last is missing (catch-up fired what the
// failovers delayed).
func Test_SystemScheduleOncePerSlotAcrossLeaderKills(t *testing.T) {
	bin := buildDocket(t)
	dir := t.TempDir()
	type node struct {
		id, grpc string
		args     []string
		proc     *childProc
		starts   int
	}
	var nodes []*node
	var grpcs, gossips []string
	for i := 1; i <= 3; i++ {
		n := &node{id: fmt.Sprintf("n%d", i), grpc: freeAddr(t)}
		nodes = append(nodes, n)
		grpcs, gossips = append(grpcs, n.grpc), append(gossips, freeAddr(t))
	}
	start := func(n *node) {
		n.starts++
		n.proc = startLimitedAgent(t, bin, 4096, filepath.Join(dir, fmt.Sprintf("%s-%d.log", n.id, n.starts)), n.args...)
	}
	for i, n := range nodes {
		n.args = []string{"agent", "--id", n.id, "--data-dir", filepath.Join(dir, n.id), "--grpc-addr", n.grpc,
			"--raft-addr", freeAddr(t), "--gossip-addr", gossips[i], "--gossip-local",
			"--bootstrap-expect", "3", "--join", strings.Join(gossips, ",")}
		start(n)
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
	// fired is the schedule's count of enqueued tasks, -1 when unknown.
	fired := func() int {
		out, err := cli(grpcs, "schedule", "list", "--json")
		if err != nil {
			return -1
		}
		var l struct{ Schedules []struct{ Fired string } }
		if json.Unmarshal([]byte(out), &l) != nil || len(l.Schedules) != 1 {
			return -1
		}
		n, _ := strconv.Atoi(l.Schedules[0].Fired)
		return n
	}
	waitFor(t, 60*time.Second, "a leader with schedules latched", func() bool {
		st := statusOf(grpcs)
		return st.LeaderID != "" && st.EnabledFeatureLevel >= fsm.LevelSchedules
	})
	must(grpcs, "schedule", "add", "tick", "--queue", "ticks", "--cron", "@every 1s", "--payload", "tick",
		"--missed", "catchup", "--catchup-max", "100")
	waitFor(t, 20*time.Second, "three slots fired", func() bool { return fired() >= 3 })

	for kill := 1; kill <= 2; kill++ {
		leader := statusOf(grpcs).LeaderID
		var victim *node
		var rest []string
		for _, n := range nodes {
			if n.id == leader {
				victim = n
			} else {
				rest = append(rest, n.grpc)
			}
		}
		if victim == nil {
			t.Fatalf("kill %d: leader %q is none of the nodes", kill, leader)
		}
		if err := victim.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case <-victim.proc.done:
			victim.proc.gone = true
		case <-time.After(10 * time.Second):
			t.Fatalf("%s survived SIGKILL", victim.id)
		}
		waitFor(t, 30*time.Second, "a new leader among the survivors", func() bool {
			st := statusOf(rest)
			return st.LeaderID != "" && st.LeaderID != leader
		})
		before := fired()
		waitFor(t, 30*time.Second, "three slots fired by the new leader", func() bool { return fired() >= before+3 })
		start(victim)
		waitFor(t, 30*time.Second, victim.id+" back", func() bool { return statusOf([]string{victim.grpc}).LeaderID != "" })
	}
	before := fired()
	waitFor(t, 30*time.Second, "three slots fired with every node back", func() bool { return fired() >= before+3 })
	if out := must(grpcs, "schedule", "remove", "tick"); !strings.Contains(out, "removed") {
		t.Fatalf("remove printed %q", out)
	}
	total := fired()
	if total >= 0 {
		t.Fatalf("the schedule is still listed after its removal (fired %d)", total)
	}

	type task struct {
		ID           string
		Schedule     string
		ScheduleSlot string
	}
	var tasks []task
	for {
		var got []task
		out := must(grpcs, "claim", "ticks", "-n", "1000", "--json")
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			var one task // one task prints as an object, not a list
			if err := json.Unmarshal([]byte(out), &one); err != nil {
				t.Fatalf("claim --json printed %q", out)
			}
			got = []task{one}
		}
		if len(got) == 0 {
			break
		}
		tasks = append(tasks, got...)
	}
	slots := map[int64]string{}
	var lo, hi int64
	for _, tk := range tasks {
		s, err := strconv.ParseInt(tk.ScheduleSlot, 10, 64)
		if err != nil || tk.Schedule != "tick" || s%int64(time.Second) != 0 {
			t.Fatalf("task %+v: not a slot of tick", tk)
		}
		if other, dup := slots[s]; dup {
			t.Fatalf("slot %s enqueued twice: tasks %s and %s", time.Unix(0, s).UTC().Format(time.RFC3339), other, tk.ID)
		}
		slots[s] = tk.ID
		if lo == 0 || s < lo {
			lo = s
		}
		hi = max(hi, s)
	}
	if len(slots) < 12 {
		t.Fatalf("%d slots fired; the run should span at least a dozen", len(slots))
	}
	if want := (hi-lo)/int64(time.Second) + 1; int64(len(slots)) != want {
		t.Fatalf("%d slots from %s to %s, want %d: a slot was skipped", len(slots),
			time.Unix(0, lo).UTC().Format(time.RFC3339), time.Unix(0, hi).UTC().Format(time.RFC3339), want)
	}
	t.Logf("%d slots, each enqueued once, none missing, across two leader kills", len(slots))
}
