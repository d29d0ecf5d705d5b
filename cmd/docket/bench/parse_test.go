package bench

import (
	"errors"
	"io"
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
		{"--workload", "failover", "--addr", "127.0.0.1:1"},
		{"--workload", "backlog", "--addr", "127.0.0.1:1"},
		{"extra-positional"},
		{"--procs", "2"},
		{"--groups", "2"},
		{"--groups", "0", "--procs", "3"},
		{"--log-store", "rocks"},
	} {
		if _, err := parse(args, io.Discard); !errors.Is(err, ErrUsage) {
			t.Errorf("parse(%q) = %v, want ErrUsage", args, err)
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
