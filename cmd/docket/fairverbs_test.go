package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_FairFlagsRefusedBeforeDialling: a wrong per-key flag is a usage
// error found before any node is dialled (the address is a closed port).
func Test_FairFlagsRefusedBeforeDialling(t *testing.T) {
	for _, args := range [][]string{
		{"queue", "limit", "jobs", "--per-key-pending", "keep-newest"},
		{"queue", "limit", "jobs", "--per-key-pending", "newest", "--per-key-depth", "1"},
		{"queue", "limit", "jobs", "--order", "random"},
		{"queue", "limit", "--tenant-wide", "--concurrency", "2", "--order", "fair"},
		{"queue", "pause", "jobs", "--order", "fair"},
		{"key-limit", "jobs", "acme"},
		{"key-limit", "jobs"},
		{"keys", "jobs", "--limit", "1001"},
		{"keys"},
	} {
		err := run(context.Background(), append(args, "--addr", "127.0.0.1:1"), &bytes.Buffer{}, &bytes.Buffer{})
		if code := exitCode(err); code != exitUsage {
			t.Errorf("docket %s: exit %d (%v), want %d", strings.Join(args, " "), code, err, exitUsage)
		}
	}
}

// Test_KeysTables: `docket keys` shows both lists with each key's limit
// and weight (weight 0 is 1), cuts a long key, and says how to make a
// queue without per-key rules keyed.
func Test_KeysTables(t *testing.T) {
	var b bytes.Buffer
	keysTables(&b, "exports", "default", &pb.ListKeysResponse{Keyed: true, Keys: 3,
		ByBacklog: []*pb.KeyStats{{Key: []byte("acme"), Pending: 19990, Running: 2, MaxRunning: 2},
			{Key: bytes.Repeat([]byte("k"), 40), Pending: 3, Running: 1, Weight: 3}},
		ByRunning: []*pb.KeyStats{{Key: []byte("acme"), Pending: 19990, Running: 2, MaxRunning: 2}}})
	out := b.String()
	for _, re := range []string{
		`(?m)^exports/default: 3 keys with a pending or running task$`,
		`(?m)^by backlog\nKEY\s+PENDING\s+RUNNING\s+LIMIT\s+WEIGHT\nacme\s+19990\s+2\s+2\s+1\nk{29}\.\.\.\s+3\s+1\s+-\s+3\n`,
		`(?m)^by running\nKEY\s+PENDING\s+RUNNING\s+LIMIT\s+WEIGHT\nacme\s+19990\s+2\s+2\s+1\n$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("keys printed\n%s\nwhich does not match %s", out, re)
		}
	}
	b.Reset()
	keysTables(&b, "jobs", "default", &pb.ListKeysResponse{})
	if !strings.Contains(b.String(), "jobs/default has no per-key rule (docket queue limit jobs --max-running-per-key") {
		t.Errorf("an unkeyed queue printed %q", b.String())
	}
}

// Test_CLIFairQueue: the README's fair-queue tour: a queue made fair with
// a per-key limit, keyed tasks, a claim that takes one task per key, the
// key in `docket task` and `docket tasks`, `docket keys`, and a key's
// override. It needs the FSM's fair-queue rules.
func Test_CLIFairQueue(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	addrs := strings.Join(addrsOf(nodes), ",")
	waitClusterLevel(t, nodes, fsm.LevelFairQueues)
	if s := docket(t, addrs, "queue", "limit", "exports", "--max-running-per-key", "1", "--order", "fair"); strings.TrimSpace(s) != "exports/default: per key 1, order fair" {
		t.Fatalf("limit printed %q", s)
	}
	var first string
	for range 5 {
		out := docket(t, addrs, "enqueue", "exports", "big", "--task-key", "acme")
		if first == "" {
			first = strings.Fields(out)[0]
		}
	}
	docket(t, addrs, "enqueue", "exports", "small", "--task-key", "globex")
	if s := docket(t, addrs, "task", first); !strings.Contains(s, "\nkey:       acme\n") {
		t.Fatalf("task printed %q", s)
	}
	if s := docket(t, addrs, "tasks", "exports"); !regexp.MustCompile(`(?m)^ID\s+PRIO\s+FAILED\s+VISIBLE AT\s+KEY\s+PAYLOAD\n\S+\s+0\s+0/\d+\s+\S+\s+acme\s+big$`).MatchString(s) {
		t.Fatalf("tasks printed %q", s)
	}
	if s := docket(t, addrs, "claim", "exports", "-n", "10"); strings.Count(s, `key="acme"`) != 1 || strings.Count(s, `key="globex"`) != 1 || strings.Count(s, "\n") != 2 {
		t.Fatalf("a claim of 10 under a per-key limit of 1 printed %q", s)
	}
	keys := docket(t, addrs, "keys", "exports")
	if !regexp.MustCompile(`(?m)^by backlog\nKEY\s+PENDING\s+RUNNING\s+LIMIT\s+WEIGHT\nacme\s+4\s+1\s+1\s+1$`).MatchString(keys) {
		t.Fatalf("keys printed %q", keys)
	}
	if s := docket(t, addrs, "key-limit", "exports", "acme", "--max-running", "3", "--weight", "2"); strings.TrimSpace(s) != "exports/default key acme: max running 3, weight 2" {
		t.Fatalf("key-limit printed %q", s)
	}
	if s := docket(t, addrs, "key-limit", "exports", "acme", "--max-running", "3"); strings.TrimSpace(s) != "exports/default key acme: unchanged" {
		t.Fatalf("the same key-limit printed %q", s)
	}
}
