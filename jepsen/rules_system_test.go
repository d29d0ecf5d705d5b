//go:build system

package jepsen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// Test_SystemRulesHealPerFault: two faults' filter rules on one node, one
// rule the same in both; healing the first removes only its own, so the
// second's cut and loss still hold until it heals too. Before, every heal
// flushed every node's rules. Needs root (a network namespace), like the
// harness; it is not skipped without it.
func Test_SystemRulesHealPerFault(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root for a network namespace (the harness does too)")
	}
	ctx := context.Background()
	var b [3]byte
	_, _ = rand.Read(b[:])
	// Not the harness's dj<hex>- prefix: a harness run deletes those.
	n := &Net{Prefix: "dkt" + hex.EncodeToString(b[:]) + "-", N: 2, log: slog.New(slog.DiscardHandler)}
	for i := 1; i <= n.N; i++ {
		if _, err := run(ctx, "ip", "netns", "add", n.NodeNS(i)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = run(context.Background(), "ip", "netns", "del", n.NodeNS(i)) })
	}
	rules := func() string {
		out, err := run(ctx, "ip", "netns", "exec", n.NodeNS(1), "iptables", "-w", "5", "-S", "INPUT")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, c := n.Rules(), n.Rules()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.Drop(ctx, 1, 2))
	must(c.Drop(ctx, 1, 2))
	must(c.Loss(ctx, 1, 0.2))
	drop := "-A INPUT -s " + nodeIP(2) + "/32 -j DROP"
	if got := strings.Count(rules(), drop); got != 2 {
		t.Fatalf("%d copies of the cut, want 2:\n%s", got, rules())
	}
	must(a.Heal(ctx))
	if got := rules(); strings.Count(got, drop) != 1 || !strings.Contains(got, "statistic") {
		t.Fatalf("healing one fault removed the other's rules:\n%s", got)
	}
	must(c.Heal(ctx))
	if got := rules(); strings.Contains(got, "DROP") {
		t.Fatalf("rules left after both heals:\n%s", got)
	}
}
