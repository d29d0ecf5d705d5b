//go:build system

package health_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/health"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/raftlog"
	"github.com/dockethq/docket/internal/testwait"
)

// mustTmpfs mounts a tmpfs of size bytes on a new directory and unmounts it
// at cleanup. It needs root (CI and the dev VM run tests as root).
func mustTmpfs(t *testing.T, size int64) string {
	t.Helper()
	return mustTmpfsAt(t, filepath.Join(t.TempDir(), "tmpfs"), size)
}

// mustTmpfsAt is mustTmpfs on dir, which it creates.
func mustTmpfsAt(t *testing.T, dir string, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// A follower on a real full disk (a 24 MiB tmpfs): its Raft log fills
// first (BoltDB grows by doubling), so it says NOT_SERVING for the log,
// logs the failure a few times rather than per append, and once the
// operator deletes the ballast it catches up and serves again. The leader
// and the other follower carry on meanwhile.
//
// Pebble filling first is covered in-process (Test_FollowerDiskFull...):
// on a real disk Pebble stops the process when a MANIFEST write fails,
// which would end this test binary, not just the node.
func Test_SystemDiskFullFollowerTmpfs(t *testing.T) {
	disk := mustTmpfs(t, 24<<20)
	// Pebble gets a roomy disk of its own, so that raft.db is what fills:
	// on a shared one the race between raft.db and Pebble's flushes
	// decides which fills first, and a failed MANIFEST write stops Pebble
	// (see above).
	mustTmpfsAt(t, filepath.Join(disk, "fsm"), 512<<20)
	lines := newLineCounter()
	nodes := nodetest.ClusterWith(t, 3, func(c *cluster.Config) {
		c.ApplyLagBound = time.Second
		if c.ID == "n3" {
			c.DataDir = disk
			c.LogStore = raftlog.LogStoreBolt // raft-wal preallocates 64 MiB segments
			c.BallastBytes = 4 << 20
			c.Logger = slog.New(lines)
		}
	})
	l, n3 := nodes[0], nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	payload := strings.Repeat("x", 64<<10)
	start := time.Now()
	i := 0
	for ; i < 600 && !hasProblem(n3, ""); i++ {
		if _, err := l.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", payload)); err != nil {
			t.Fatalf("propose %d: %v", i, err)
		}
	}
	t.Logf("after %d proposals (%v): n3 problems %q", i, time.Since(start), n3.HealthProblems())
	if !hasProblem(n3, "raft log write failed") {
		t.Fatalf("n3 problems %q after %d proposals of 64 KiB on a 24 MiB disk; want a raft log problem", n3.HealthProblems(), i)
	}
	// The leader keeps writing through the other follower for 5 s while
	// n3's appends fail; n3 must not log each failed append.
	for j := 0; j < 5000 && time.Since(start) < 5*time.Second; j++ {
		if _, err := l.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", "small")); err != nil {
			t.Fatalf("propose with n3 full: %v", err)
		}
	}
	if got := lines.noSpace.Load(); got > 40 {
		t.Errorf("n3 logged %d lines about no space; want at most 40", got)
	}
	t.Logf("n3 log lines %d (no space %d)", lines.all.Load(), lines.noSpace.Load())
	if err := os.Remove(filepath.Join(disk, health.BallastFile)); err != nil {
		t.Fatalf("delete ballast: %v", err)
	}
	testwait.For(t, 20*time.Second, "n3 catches up after the ballast is deleted", func() bool {
		return n3.FSM().AppliedIndex() >= l.FSM().AppliedIndex() && len(n3.HealthProblems()) == 0
	})
}
