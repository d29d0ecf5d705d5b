package bench

import (
	"errors"
	"io"
	"maps"
	"strings"
	"testing"
	"time"
)

func Test_ParseDefaults(t *testing.T) {
	c, err := parse(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Workload != "enqueue" || c.Concurrency != 16 || c.Payload != 128 || c.Batch != 1 ||
		c.Duration != 10*time.Second || !c.Ceiling || c.Addr != "" {
		t.Fatalf("defaults: %+v", c)
	}
}

func Test_ParseRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--workload", "nope"},
		{"-c", "0"},
		{"--batch", "0"},
		{"--duration", "0s"},
		{"--retention", "-1s"},
		{"--workload", "failover", "--addr", "127.0.0.1:1"},
		{"--workload", "backlog", "--addr", "127.0.0.1:1"},
		{"extra-positional"},
		{"--procs", "2"},
		{"--groups", "2"},
		{"--groups", "0", "--procs", "3"},
		{"--log-store", "rocks"},
		{"--order", "lifo"},
		{"--order", ""},
		{"--task-keys", "-1"},
		{"--max-running-per-key", "-1"},
		{"--max-running-per-key", "4294967296"},
		{"--workload", "ceiling", "--order", "fair"},
		{"--workload", "ceiling", "--max-running-per-key", "1"},
		// More claims held at once than the per-key limit lets run.
		{"--workload", "heartbeat", "--leases", "11", "--task-keys", "10", "--max-running-per-key", "1"},
		{"--workload", "requeue", "--task-keys", "2", "--max-running-per-key", "1"},
		{"--workload", "requeue", "--count", "7", "--task-keys", "3", "--max-running-per-key", "2"},
		{"--shared-rpcs", "-2"},
		{"--shared-enqueue-rpcs", "-2"},
		{"--pairs", "2"}, // no build B
		{"--agent-exe-b", "/bin/true"},
		{"--pairs", "-1", "--agent-exe-b", "/bin/true"},
		{"--pairs", "2", "--agent-exe-b", "/bin/true", "--addr", "127.0.0.1:1"},
		{"--pairs", "2", "--agent-exe-b", "/bin/true", "--workload", "failover"},
	} {
		if _, err := parse(args, io.Discard); !errors.Is(err, ErrUsage) {
			t.Errorf("parse(%q) = %v, want ErrUsage", args, err)
		}
	}
}

// Test_ParseSharedRPCs: the report records each kind's RPCs in flight
// as the client gets them, the client's defaults when no flag is given.
func Test_ParseSharedRPCs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want map[string]int
	}{
		{nil, map[string]int{"enqueue": 1, "submit": 2, "claim": 2, "heartbeat": 2}},
		{[]string{"--shared-rpcs", "0"}, map[string]int{"enqueue": 0, "submit": 0, "claim": 0, "heartbeat": 0}},
		{[]string{"--shared-enqueue-rpcs", "2"}, map[string]int{"enqueue": 2, "submit": 2, "claim": 2, "heartbeat": 2}},
		{[]string{"--shared-rpcs", "4", "--shared-enqueue-rpcs", "1"}, map[string]int{"enqueue": 1, "submit": 4, "claim": 4, "heartbeat": 4}},
	} {
		cfg, err := parse(c.args, io.Discard)
		if err != nil {
			t.Fatalf("parse(%q): %v", c.args, err)
		}
		if got := cfg.sharedRPCs(); !maps.Equal(got, c.want) {
			t.Errorf("parse(%q): shared RPCs %v, want %v", c.args, got, c.want)
		}
	}
}

func Test_ParseAgentArgs(t *testing.T) {
	c, err := parse([]string{"--agent-args", "--max-append-entries 1024  --log-cache 8192"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--max-append-entries", "1024", "--log-cache", "8192"}
	if len(c.AgentArgs) != len(want) {
		t.Fatalf("agent args %q", c.AgentArgs)
	}
	for i := range want {
		if c.AgentArgs[i] != want[i] {
			t.Fatalf("agent args %q", c.AgentArgs)
		}
	}
}

// Test_ParseToken: --token reaches an --addr cluster, DOCKET_TOKEN stands
// in for it, and the report's command never shows the secret.
func Test_ParseToken(t *testing.T) {
	t.Setenv(envToken, "from-env")
	c, err := parse([]string{"--addr", "127.0.0.1:1"}, io.Discard)
	if err != nil || c.Token != "from-env" {
		t.Fatalf("env token: %q %v", c.Token, err)
	}
	c, err = parse([]string{"--addr", "127.0.0.1:1", "--token", "from-flag"}, io.Discard)
	if err != nil || c.Token != "from-flag" {
		t.Fatalf("flag token: %q %v", c.Token, err)
	}
	if _, err := parse([]string{"--token", "x"}, io.Discard); !errors.Is(err, ErrUsage) {
		t.Fatalf("--token without --addr: %v, want ErrUsage", err)
	}
	if _, err := parse([]string{"--addr", "127.0.0.1:1", "--auth"}, io.Discard); !errors.Is(err, ErrUsage) {
		t.Fatalf("--auth with --addr: %v, want ErrUsage", err)
	}
	got := strings.Join(redactToken([]string{"--addr", "a", "--token", "s3cret", "-token=s3cret", "--token=s3cret"}), " ")
	if strings.Contains(got, "s3cret") || strings.Count(got, "REDACTED") != 3 {
		t.Fatalf("redacted: %q", got)
	}
}

// Test_ParseFair: the fair-queue flags reach the Config and the report's
// config, and without them the config and the text report say exactly
// what they said before the flags existed.
func Test_ParseFair(t *testing.T) {
	plain, err := parse([]string{"--workload", "drain", "--count", "100"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if plain.TaskKeys != 0 || plain.Order != "" || plain.MaxRunningPerKey != nil || plain.fair() || plain.fairText() != "" {
		t.Fatalf("no fair flags: %+v", plain)
	}
	for _, k := range []string{"task_keys", "order", "max_running_per_key"} {
		if _, ok := plain.describe()[k]; ok {
			t.Fatalf("config without fair flags has %q", k)
		}
	}

	c, err := parse([]string{"--workload", "drain", "--task-keys", "10000", "--order", "FAIR", "--max-running-per-key", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.TaskKeys != 10000 || c.Order != "fair" || c.MaxRunningPerKey == nil || *c.MaxRunningPerKey != 0 {
		t.Fatalf("fair flags: %+v", c)
	}
	d := c.describe()
	if d["task_keys"] != 10000 || d["order"] != "fair" || d["max_running_per_key"] != uint32(0) {
		t.Fatalf("config: %v", d)
	}
	if got, want := c.fairText(), "fair queues: task keys 10000 (k000000..k009999, round robin), order fair, max running per key 0 (cleared)"; got != want {
		t.Fatalf("text: %q, want %q", got, want)
	}

	// One flag given: the others are stated as left alone, so a keyed
	// run and its baseline carry the same fields.
	c, err = parse([]string{"--order", "fifo"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d = c.describe()
	if d["task_keys"] != 0 || d["order"] != "fifo" || d["max_running_per_key"] != "unchanged" {
		t.Fatalf("config: %v", d)
	}
	if got, want := c.fairText(), "fair queues: task keys none, order fifo, max running per key unchanged"; got != want {
		t.Fatalf("text: %q, want %q", got, want)
	}

	// --task-keys 0 given: no key and no level 16 needed, but the report
	// says so, as the plain baseline of a keyed run.
	c, err = parse([]string{"--task-keys", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.fair() || c.describe()["task_keys"] != 0 || c.fairText() != "fair queues: task keys none, order unchanged, max running per key unchanged" {
		t.Fatalf("--task-keys 0: fair %v, config %v, text %q", c.fair(), c.describe(), c.fairText())
	}

	// The ceiling's entries carry the keys too (their size follows the
	// workload's), so --task-keys is fine there.
	if _, err := parse([]string{"--workload", "ceiling", "--task-keys", "5"}, io.Discard); err != nil {
		t.Fatal(err)
	}
}

// Test_TaskKeysRoundRobin: the i-th task enqueued gets key i mod N across
// calls, and no key at all without --task-keys.
func Test_TaskKeysRoundRobin(t *testing.T) {
	c, err := parse([]string{"--task-keys", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cfg: c}
	var got []string
	for _, n := range []int{2, 1, 2} {
		for _, nt := range r.newTasks(n, nil) {
			got = append(got, string(nt.GetKey()))
		}
	}
	if want := "k000000 k000001 k000002 k000000 k000001"; strings.Join(got, " ") != want {
		t.Fatalf("keys %q, want %q", got, want)
	}
	r = &runner{cfg: Config{Queue: "q"}}
	if k := r.newTasks(1, nil)[0].GetKey(); k != nil {
		t.Fatalf("key without --task-keys: %q", k)
	}
}

// Test_PrintTableFairLine: the text report names the fair-queue settings
// under its first line, and has no such line without them.
func Test_PrintTableFairLine(t *testing.T) {
	rep := &Report{Header: Header{Workload: "enqueue"}, Ops: []Summary{{Op: "enqueue", Count: 1}}}
	var plain strings.Builder
	printTable(&plain, rep)
	if strings.Contains(plain.String(), "fair queues") {
		t.Fatalf("plain report:\n%s", plain.String())
	}
	c, err := parse([]string{"--task-keys", "10", "--order", "fair"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rep.fair = c.fairText()
	var keyed strings.Builder
	printTable(&keyed, rep)
	lines := strings.Split(keyed.String(), "\n")
	if len(lines) < 2 || lines[1] != "fair queues: task keys 10 (k000000..k000009, round robin), order fair, max running per key unchanged" {
		t.Fatalf("keyed report:\n%s", keyed.String())
	}
	if strings.Replace(keyed.String(), lines[1]+"\n", "", 1) != plain.String() {
		t.Fatalf("the fair line changed more than itself:\n%s\n%s", plain.String(), keyed.String())
	}
}

// The claims a workload holds at once fit under the per-key limit it
// sets, or no limit applies (keyless tasks, a limit of 0, or a workload
// that holds few claims).
func Test_ParseHeldFitsKeyLimit(t *testing.T) {
	for _, args := range [][]string{
		{"--workload", "heartbeat", "--leases", "10", "--task-keys", "10", "--max-running-per-key", "1"},
		{"--workload", "heartbeat", "--leases", "1000", "--max-running-per-key", "1"},
		{"--workload", "heartbeat", "--leases", "1000", "--task-keys", "10", "--max-running-per-key", "0"},
		{"--workload", "requeue", "--count", "6", "--task-keys", "3", "--max-running-per-key", "2"},
		{"--workload", "cycle", "--task-keys", "2", "--max-running-per-key", "1"},
	} {
		if _, err := parse(args, io.Discard); err != nil {
			t.Errorf("parse(%q) = %v, want it accepted", args, err)
		}
	}
}

func Test_RetentionReachesEveryTask(t *testing.T) {
	c, err := parse([]string{"--retention", "1ns", "--task-keys", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.describe()["retention"]; got != "1ns" {
		t.Fatalf("report's retention = %v, want 1ns", got)
	}
	r := &runner{cfg: c}
	for i, nt := range r.newTasks(3, []byte("x")) {
		if nt.GetRetentionNs() != 1 || len(nt.GetKey()) == 0 {
			t.Fatalf("task %d: retention %d ns, key %q; want 1 ns and a key", i, nt.GetRetentionNs(), nt.GetKey())
		}
	}
	plain, err := parse(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := (&runner{cfg: plain}).newTasks(1, nil)[0].GetRetentionNs(); got != 0 {
		t.Fatalf("default retention = %d ns, want 0 (the server's)", got)
	}
}
