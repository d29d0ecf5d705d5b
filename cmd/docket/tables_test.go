package main

import (
	"regexp"
	"strings"
	"testing"
)

// Test_CLITables: tasks and dlq list print a header and a payload column
// (quoted, cut to payloadWidth), stats keeps pause and limits in their own
// columns, schedule list shows the next run, and a running task shows its
// attempt number, not "attempts 0" and "fence 0".
func Test_CLITables(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	addrs := strings.Join(addrsOf(nodes), ",")
	long := strings.Repeat("p", 100)
	docket(t, addrs, "enqueue", "jobs", "hello world")
	docket(t, addrs, "enqueue", "jobs", long)
	docket(t, addrs, "queue", "limit", "jobs", "--concurrency", "4")
	docket(t, addrs, "queue", "pause", "jobs")

	tasks := docket(t, addrs, "tasks", "jobs")
	for _, re := range []string{`^ID +PRIO +FAILED +VISIBLE AT +PAYLOAD\n`, `(?m) 0/5 +\S+ +"hello world"$`,
		`(?m) ` + strings.Repeat("p", payloadWidth-3) + `\.\.\.$`} {
		if !regexp.MustCompile(re).MatchString(tasks) {
			t.Errorf("tasks printed no %s:\n%s", re, tasks)
		}
	}
	stats := docket(t, addrs, "stats", "jobs")
	if !regexp.MustCompile(`(?m)^QUEUE .* OLDEST +LIMITS$`).MatchString(stats) ||
		!regexp.MustCompile(`(?m)^jobs +default +paused +2 +0 +0 +0 +0 +0 +\S+ +running 0/4$`).MatchString(stats) {
		t.Errorf("stats printed:\n%s", stats)
	}
	docket(t, addrs, "queue", "resume", "jobs")

	docket(t, addrs, "schedule", "add", "tick", "--queue", "other", "--cron", "@every 1h")
	if s := docket(t, addrs, "schedule", "list"); !regexp.MustCompile(`NEXT RUN\n.*@every 1h .* \d{4}-\d\d-\d\dT\d\d:00:00Z \(in \S+\)\n`).MatchString(s) {
		t.Errorf("schedule list printed:\n%s", s)
	}

	m := regexp.MustCompile(`^(\S+) fence=`).FindStringSubmatch(docket(t, addrs, "claim", "jobs", "-n", "1"))
	if m == nil {
		t.Fatal("claim printed no task")
	}
	// The CLI's GetTask is a reader's: the running claim's fence stays hidden.
	task := docket(t, addrs, "task", m[1])
	if !strings.Contains(task, "attempt:   1 of 5, running\n") || strings.Contains(task, "fence:     0") || strings.Contains(task, "attempts:  0") {
		t.Errorf("task of a running claim printed:\n%s", task)
	}
	if s := docket(t, addrs, "tasks", "jobs", "--state", "running"); !strings.HasPrefix(s, "ID ") || !strings.Contains(s, "LEASE UNTIL") {
		t.Errorf("tasks --state running printed:\n%s", s)
	}
	docket(t, addrs, "enqueue", "dead", "x y", "--max-attempts", "1")
	m = regexp.MustCompile(`^(\S+) fence=(\d+)`).FindStringSubmatch(docket(t, addrs, "claim", "dead"))
	docket(t, addrs, "nack", m[1], m[2], "--reason", "boom")
	if s := docket(t, addrs, "dlq", "list", "dead"); !regexp.MustCompile(`^ID +QUEUE +ATTEMPTS +ERROR +PAYLOAD\n` + m[1] + ` +dead +1/1 +boom +"x y"\n`).MatchString(s) {
		t.Errorf("dlq list printed:\n%s", s)
	}
}
