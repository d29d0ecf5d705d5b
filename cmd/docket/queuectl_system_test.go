//go:build system

package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/fsm"
)

// Test_SystemPauseSurvivesLeaderKill is the black-box check of
// queue control: three agents of the built binary, driven by the built
// binary's own verbs. A task is enqueued, its queue paused, and the
// leader's process killed (SIGKILL): on the new leader a claim gets
// nothing, also after waiting, and `docket queues` says paused; after
// `docket queue resume` the claim gets the task.
func Test_SystemPauseSurvivesLeaderKill(t *testing.T) {
	ac := startAgentCluster(t, fsm.LevelQueueControl)
	grpcs, must := ac.grpcs, ac.must

	id := strings.Fields(must(grpcs, "enqueue", "jobs", "resize image 42"))[0]
	if out := must(grpcs, "queue", "pause", "jobs"); !strings.Contains(out, "paused") {
		t.Fatalf("pause printed %q", out)
	}
	_, rest := ac.killLeader()

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
