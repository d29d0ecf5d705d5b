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
	"github.com/dockethq/docket/internal/testwait"
)

// Test_CLISchedule: the schedule verbs as the README tour runs them, text
// and --json; a scheduled task shows its schedule and slot in `docket task`.
func Test_CLISchedule(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	addrs := strings.Join(addrsOf(nodes), ",")
	// The leader latches the level a moment after it is elected; until
	// then a put is FEATURE_DISABLED (seen on a loaded machine).
	testwait.For(t, 10*time.Second, "the schedules level latched", func() bool {
		return nodes[0].node.FSM().EnabledLevel() >= fsm.LevelSchedules
	})

	out := docket(t, addrs, "schedule", "add", "tick", "--queue", "ticks", "--cron", "@every 1s", "--payload", "hello",
		"--missed", "catchup", "--catchup-max", "3")
	if strings.TrimSpace(out) != `schedule default/tick added: "@every 1s" in UTC -> queue ticks` {
		t.Fatalf("add printed %q", out)
	}
	out = docket(t, addrs, "schedule", "add", "nightly", "--queue", "reports", "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--json")
	var put struct {
		Created  bool
		Schedule struct{ Name, Zone, Spec string }
	}
	if err := json.Unmarshal([]byte(out), &put); err != nil || !put.Created || put.Schedule.Zone != "Europe/Berlin" {
		t.Fatalf("add --json: %q %+v %v", out, put, err)
	}
	// The first slot fires within a second or two; claim its task.
	var id string
	testwait.For(t, 15*time.Second, "a scheduled task", func() bool {
		if s := docket(t, addrs, "claim", "ticks"); !strings.Contains(s, "no task") {
			id = strings.Fields(s)[0]
		}
		return id != ""
	})
	if s := docket(t, addrs, "task", id); !regexp.MustCompile(`(?m)^schedule:\s+tick \(slot \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)$`).MatchString(s) {
		t.Fatalf("task printed %q", s)
	}
	out = docket(t, addrs, "schedule", "list")
	if !regexp.MustCompile(`(?m)^nightly\s+reports\s+30 2 \* \* \*\s+Europe/Berlin\s+skip\s+0\s+-\s+\d{4}-\d\d-\d\dT0[01]:30:00Z \(in \S+\)$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^tick\s+ticks\s+@every 1s\s+UTC\s+catchup:3\s+[1-9]\d*\s+\d{4}-`).MatchString(out) {
		t.Fatalf("list printed %q", out)
	}
	var listed struct {
		Schedules []struct {
			Name  string
			Fired string // uint64 is a JSON string in protojson
		}
	}
	if err := json.Unmarshal([]byte(docket(t, addrs, "schedule", "list", "--json")), &listed); err != nil || len(listed.Schedules) != 2 || listed.Schedules[1].Fired == "" {
		t.Fatalf("list --json: %+v %v", listed, err)
	}
	if s := docket(t, addrs, "schedule", "remove", "tick"); strings.TrimSpace(s) != "schedule default/tick removed" {
		t.Fatalf("remove printed %q", s)
	}
	// A second remove finds nothing: exit code 3, and --json still
	// prints the answer.
	var out2 bytes.Buffer
	err2 := run(testCtx(t), []string{"schedule", "remove", "tick", "--json", "--addr", addrs}, &out2, &bytes.Buffer{})
	if exitCode(err2) != exitNotFound || strings.TrimSpace(out2.String()) != "{}" {
		t.Fatalf("second remove: exit %d (%v), printed %q", exitCode(err2), err2, out2.String())
	}
	// A bad spec is refused before it reaches the log, naming the field.
	var o, e bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := run(ctx, []string{"schedule", "add", "bad", "--addr", addrs, "--queue", "q", "--cron", "0 25 * * *"}, &o, &e)
	if err == nil || !strings.Contains(err.Error(), "spec") {
		t.Fatalf("bad spec: %v %q", err, o.String())
	}
	if err := run(ctx, []string{"schedule", "add", "bad", "--addr", addrs, "--cron", "@hourly"}, &o, &e); err == nil {
		t.Fatal("add without --queue ran")
	}
}
