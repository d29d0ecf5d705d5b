package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// docketFails runs a verb that must fail and returns its error text.
func docketFails(t *testing.T, addrs string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	full := append([]string{args[0], "--addr", addrs}, args[1:]...)
	err := run(ctx, full, &out, &errb)
	if err == nil {
		t.Fatalf("docket %s succeeded: %s", strings.Join(args, " "), out.String())
	}
	return err.Error() + errb.String()
}

// Test_CLITaskTenant: `docket task ID --tenant T` reads the task as
// tenant T: another tenant's task is not found, its own is shown.
func Test_CLITaskTenant(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	addrs := strings.Join(addrsOf(nodes), ",")
	id := strings.Fields(docket(t, addrs, "enqueue", "mail", "x", "--tenant", "acme"))[0]
	if out := docket(t, addrs, "task", id, "--tenant", "acme"); !strings.Contains(out, "mail/acme") {
		t.Fatalf("task as its tenant printed %q", out)
	}
	if out := docketFails(t, addrs, "task", id, "--tenant", "other"); !strings.Contains(strings.ToLower(out), "not found") {
		t.Fatalf("task as another tenant: %q, want not found", out)
	}
	if out := docketFails(t, addrs, "task", "--tenant", "other", id); !strings.Contains(strings.ToLower(out), "not found") {
		t.Fatalf("task with --tenant before the id: %q, want not found", out)
	}
}
