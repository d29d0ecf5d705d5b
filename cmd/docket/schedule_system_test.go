//go:build system

package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
)

// Test_SystemScheduleOncePerSlotAcrossLeaderKills is the black-box
// check of recurring tasks: three agents of the built binary, driven by
// its own verbs. A schedule at @every 1s with catch-up fires while the
// leader's process is killed (SIGKILL) and restarted, twice. Then every
// task of its queue is claimed: no slot holds two tasks, and no slot
// between the first and the last is missing (catch-up fired what the
// failovers delayed).
func Test_SystemScheduleOncePerSlotAcrossLeaderKills(t *testing.T) {
	ac := startAgentCluster(t, fsm.LevelSchedules)
	grpcs, cli, must, statusOf := ac.grpcs, ac.cli, ac.must, ac.status
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
	must(grpcs, "schedule", "add", "tick", "--queue", "ticks", "--cron", "@every 1s", "--payload", "tick",
		"--missed", "catchup", "--catchup-max", "100")
	testwait.For(t, 20*time.Second, "three slots fired", func() bool { return fired() >= 3 })

	for kill := 1; kill <= 2; kill++ {
		victim, _ := ac.killLeader()
		before := fired()
		testwait.For(t, 30*time.Second, "three slots fired by the new leader", func() bool { return fired() >= before+3 })
		ac.start(victim)
		testwait.For(t, 30*time.Second, victim.id+" back", func() bool { return statusOf([]string{victim.grpc}).LeaderID != "" })
	}
	before := fired()
	testwait.For(t, 30*time.Second, "three slots fired with every node back", func() bool { return fired() >= before+3 })
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
