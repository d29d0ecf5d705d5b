package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/fsm"
)

// Test_CLIQueueControl: the queue control verbs, cancel and wait, as the
// README tour runs them, text and --json.
func Test_CLIQueueControl(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	addrs := strings.Join(addrsOf(nodes), ",")
	waitClusterLevel(t, nodes, fsm.LevelQueueControl) // pause before the latch is FEATURE_DISABLED
	idOf := func(out string) string { return strings.Fields(out)[0] }

	first := idOf(docket(t, addrs, "enqueue", "jobs", "a"))
	if s := docket(t, addrs, "queue", "pause", "jobs"); strings.TrimSpace(s) != "jobs/default paused" {
		t.Fatalf("pause printed %q", s)
	}
	if s := docket(t, addrs, "queue", "pause", "jobs", "--json"); strings.TrimSpace(s) != "{}" {
		t.Fatalf("second pause --json printed %q, want unchanged", s)
	}
	docket(t, addrs, "enqueue", "jobs", "b") // enqueues go on
	docket(t, addrs, "enqueue", "mail", "c", "--tenant", "acme")
	if s := docket(t, addrs, "claim", "jobs"); strings.TrimSpace(s) != "no task" {
		t.Fatalf("claim of a paused queue printed %q", s)
	}
	out := docket(t, addrs, "queues")
	if !regexp.MustCompile(`(?m)^jobs\s+default\s+paused\s+2\s`).MatchString(out) || !regexp.MustCompile(`(?m)^mail\s+acme\s+active\s+1\s`).MatchString(out) {
		t.Fatalf("queues printed %q", out)
	}
	if s := docket(t, addrs, "stats", "jobs"); !regexp.MustCompile(`jobs +default +paused `).MatchString(s) {
		t.Fatalf("stats of a paused queue printed %q", s)
	}
	var listed struct {
		Queues []struct {
			Queue, Tenant string
			Paused        bool
		}
	}
	if err := json.Unmarshal([]byte(docket(t, addrs, "queues", "--json")), &listed); err != nil || len(listed.Queues) != 2 || !listed.Queues[0].Paused {
		t.Fatalf("queues --json: %+v %v", listed, err)
	}
	if s := docket(t, addrs, "queue", "resume", "jobs"); strings.TrimSpace(s) != "jobs/default resumed" {
		t.Fatalf("resume printed %q", s)
	}

	// wait: blocks until the task finishes; a worker completes it meanwhile.
	done := make(chan string, 1)
	go func() {
		var o, e bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := run(ctx, []string{"wait", "--addr", addrs, "--timeout", "15s", first}, &o, &e)
		done <- o.String() + e.String() + func() string {
			if err != nil {
				return err.Error()
			}
			return ""
		}()
	}()
	m := regexp.MustCompile(`^(\S+) fence=(\d+) `).FindStringSubmatch(docket(t, addrs, "claim", "jobs"))
	if m == nil || m[1] != first {
		t.Fatalf("claim after resume: %v, want %s", m, first)
	}
	docket(t, addrs, "submit", m[1], m[2], "ok")
	select {
	case s := <-done:
		if !strings.Contains(s, "COMPLETED") || !strings.Contains(s, first) {
			t.Fatalf("wait printed %q", s)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("docket wait did not return after the task completed")
	}

	// cancel, then purge what is left, then the dead letters.
	second := idOf(docket(t, addrs, "enqueue", "jobs", "d", "--delay", "1h"))
	if s := docket(t, addrs, "cancel", second); strings.TrimSpace(s) != second+" CANCELLED" {
		t.Fatalf("cancel printed %q", s)
	}
	if s := docket(t, addrs, "queue", "purge", "jobs"); strings.TrimSpace(s) != "purged 1 pending and delayed tasks of jobs/default" {
		t.Fatalf("purge printed %q", s)
	}
	if s := docket(t, addrs, "dlq", "purge", "jobs", "--json"); strings.TrimSpace(s) != "{}" {
		t.Fatalf("dlq purge --json printed %q", s)
	}
	if s := docket(t, addrs, "queues", "--tenant", "acme"); strings.Contains(s, "jobs") || !strings.Contains(s, "mail") {
		t.Fatalf("queues --tenant acme printed %q", s)
	}
}
