//go:build system

package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testaddr"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// buildDocketAtLevel builds this package's binary linked with a lower
// feature level: the stand-in for an older release (fsm.levelOverride).
func buildDocketAtLevel(t *testing.T, level uint32) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), fmt.Sprintf("docket-level%d", level))
	ldflags := fmt.Sprintf("-X github.com/dockethq/docket/fsm.levelOverride=%d", level)
	out, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Test_SystemRollingUpgradeLatchesLevel is the version gate with
// real processes: three agents start on a build at LevelCheck (no tokens,
// no totals), and are replaced one by one, each restarted on its data dir
// by the current build, under writes. Token commands are refused with
// FEATURE_DISABLED and nothing is written for them until the last server
// runs the new build; then the leader latches the new level, tokens work,
// queue totals appear, and no acknowledged task is lost on the way.
func Test_SystemRollingUpgradeLatchesLevel(t *testing.T) {
	oldBin, newBin := buildDocketAtLevel(t, fsm.LevelCheck), buildDocket(t)
	dir := t.TempDir()
	type node struct {
		id, grpc, gossip string
		args             []string
		proc             *childProc
	}
	var nodes []*node
	var grpcs, gossips []string
	for i := 1; i <= 3; i++ {
		n := &node{id: fmt.Sprintf("n%d", i), grpc: testaddr.Free(t), gossip: testaddr.Free(t)}
		grpcs, gossips = append(grpcs, n.grpc), append(gossips, n.gossip)
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		n.args = []string{"agent", "--id", n.id, "--data-dir", filepath.Join(dir, n.id), "--grpc-addr", n.grpc,
			"--raft-addr", testaddr.Free(t), "--gossip-addr", n.gossip, "--gossip-local",
			"--bootstrap-expect", "3", "--join", strings.Join(gossips, ",")}
		n.proc = startLimitedAgent(t, oldBin, 4096, filepath.Join(dir, n.id+"-old.log"), n.args...)
	}
	c := mustClientWith(t, grpcs, client.WithAttemptTimeout(5*time.Second))
	enqueued := 0
	enqueue := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.Enqueue(ctx, &pb.NewTask{Queue: "up", Payload: []byte(fmt.Sprint(enqueued))}); err != nil {
			t.Fatalf("enqueue %d: %v", enqueued, err)
		}
		enqueued++
	}
	level := func() uint32 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := c.Status(ctx)
		if err != nil {
			return 0
		}
		return st.GetEnabledFeatureLevel()
	}
	tokenRefused := func(when string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.CreateToken(ctx, &pb.CreateTokenRequest{Name: "t", Roles: []string{"reader"}, Tenants: []string{"*"}})
		if !errors.Is(err, client.ErrFeatureDisabled) || !strings.Contains(err.Error(), fmt.Sprintf("feature level %d", fsm.LevelTokens)) {
			t.Fatalf("%s: CreateToken answered %v, want FEATURE_DISABLED naming level %d", when, err, fsm.LevelTokens)
		}
	}
	enqueue()
	testwait.For(t, 20*time.Second, "the old build's level latched", func() bool { return level() == fsm.LevelCheck })
	tokenRefused("all old")

	for i, n := range nodes {
		if err := n.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-n.proc.done:
			n.proc.gone = true
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop on SIGTERM", n.id)
		}
		enqueue() // the other two carry on
		n.proc = startLimitedAgent(t, newBin, 4096, filepath.Join(dir, n.id+"-new.log"), n.args...)
		enqueue()
		if i < len(nodes)-1 {
			// One old server is enough to hold the level back, also while
			// it restarts and is unreachable.
			if got := level(); got != fsm.LevelCheck {
				t.Fatalf("after upgrading %d of 3: enabled level %d, want %d", i+1, got, fsm.LevelCheck)
			}
			tokenRefused(fmt.Sprintf("%d of 3 upgraded", i+1))
		}
	}
	testwait.For(t, 30*time.Second, "the leader to latch the new level", func() bool { return level() == fsm.FeatureLevel })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.CreateToken(ctx, &pb.CreateTokenRequest{Name: "t", Roles: []string{"reader"}, Tenants: []string{"*"}}); err != nil {
		t.Fatalf("CreateToken once every server runs the new build: %v", err)
	}
	enqueue()
	stats, err := c.Stats(ctx, "up", "")
	if err != nil || len(stats) != 1 {
		t.Fatalf("stats: %v %v", stats, err)
	}
	if got := stats[0].GetPending(); got != uint64(enqueued) {
		t.Fatalf("%d pending after the upgrade, %d enqueued", got, enqueued)
	}
	if got := stats[0].GetTotals().GetEnqueued(); got != 1 {
		t.Fatalf("totals after the latch: %v, want the one enqueue since", stats[0].GetTotals())
	}
}
