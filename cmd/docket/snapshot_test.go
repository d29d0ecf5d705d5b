package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/internal/testwait"
)

// Test_CLISnapshotSaveRestore: `docket snapshot save` against any node of
// a 3-node cluster (it follows the leader), more writes, then `docket
// snapshot restore` of the file: stats show the backup's state again on
// every node, and the cluster takes writes after it. A damaged file is
// refused before anything is sent.
func Test_CLISnapshotSaveRestore(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	var follower string
	for _, n := range followers(nodes, leader) {
		follower = n.grpcAddr
	}
	for range 3 {
		docket(t, follower, "enqueue", "jobs", "before")
	}
	path := filepath.Join(t.TempDir(), "docket.snap")
	if s := docket(t, follower, "snapshot", "save", path); !strings.HasPrefix(s, "saved docket.snap") {
		t.Fatalf("snapshot save printed %q", s)
	}
	if _, err := os.Stat(path + ".part"); !os.IsNotExist(err) {
		t.Fatalf("%s.part left behind: %v", path, err)
	}
	docket(t, follower, "enqueue", "jobs", "after")
	docket(t, follower, "enqueue", "other", "after")

	bad := filepath.Join(t.TempDir(), "bad.snap")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	if err := run(ctx, []string{"snapshot", "restore", bad, "--addr", follower}, &out, &errb); err == nil || !strings.Contains(err.Error(), "not a valid docket backup") {
		t.Fatalf("restore of a cut file: %v", err)
	}

	if s := docket(t, follower, "snapshot", "restore", path); !strings.Contains(s, "restored docket.snap") {
		t.Fatalf("snapshot restore printed %q", s)
	}
	for _, n := range nodes {
		testwait.For(t, 10*time.Second, n.id+" to hold the backup's state", func() bool {
			jobs, _, err1 := n.node.FSM().Counts("jobs", "default")
			other, _, err2 := n.node.FSM().Counts("other", "default")
			return err1 == nil && err2 == nil && jobs == 3 && other == 0
		})
	}
	docket(t, follower, "enqueue", "jobs", "later")
	if s := docket(t, follower, "stats"); !regexp.MustCompile(`jobs\s+default\s+active\s+4\s`).MatchString(s) {
		t.Fatalf("stats after a write following the restore: %q", s)
	}
}
