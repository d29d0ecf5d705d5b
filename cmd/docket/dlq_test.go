package main

import (
	"regexp"
	"strings"
	"testing"
)

// Test_CLIDeadLetterPages: `docket dlq list` prints the cursor of the next
// page in a form that pasted back as --cursor continues the listing, each
// dead letter once.
func Test_CLIDeadLetterPages(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	addrs := strings.Join(addrsOf(nodes), ",")
	claimed := regexp.MustCompile(`^(\S+) fence=(\d+) `)
	want := map[string]bool{}
	for range 3 {
		docket(t, addrs, "enqueue", "jobs", "x", "--max-attempts", "1")
		m := claimed.FindStringSubmatch(docket(t, addrs, "claim", "jobs"))
		if m == nil {
			t.Fatal("claim printed no task")
		}
		docket(t, addrs, "nack", m[1], m[2])
		want[m[1]] = true
	}
	more := regexp.MustCompile(`(?m)^more: --cursor "([^"]*)"$`)
	seen := map[string]bool{}
	args := []string{"dlq", "list", "jobs", "--limit", "1"}
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("the listing never ended")
		}
		out := docket(t, addrs, args...)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[1] == "jobs" {
				id := f[0]
				if seen[id] {
					t.Fatalf("%s listed twice", id)
				}
				seen[id] = true
			}
		}
		m := more.FindStringSubmatch(out)
		if m == nil {
			break
		}
		args = []string{"dlq", "list", "jobs", "--limit", "1", "--cursor", m[1]}
	}
	if len(seen) != len(want) {
		t.Fatalf("listed %v, want %v", seen, want)
	}
	for id := range want {
		if !seen[id] {
			t.Fatalf("listed %v, want %v", seen, want)
		}
	}
}
