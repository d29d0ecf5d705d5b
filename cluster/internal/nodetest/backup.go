package nodetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/internal/testwait"
)

// BackupRestoreRoundTrip is `docket snapshot save|restore` at the cluster
// level, on any of the log stores: a restore brings every replica back to
// the backup's keyspace (the writes after it are gone, on every node, with
// equal hashes), a damaged backup is refused before Raft sees it, and the
// cluster goes on with ids above the backup's.
func BackupRestoreRoundTrip(t testing.TB, nodes []*cluster.Node) {
	t.Helper()
	l := LeaderOf(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := EnqueueN(t, ctx, l, "a", 10)

	path := filepath.Join(t.TempDir(), "backup.snap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.SaveBackup(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if h.Index < 10 || h.Node != l.ID() {
		t.Fatalf("backup header %+v", h)
	}
	EnqueueN(t, ctx, l, "a", 5)
	EnqueueN(t, ctx, l, "b", 3)

	// A damaged copy is refused before Raft sees it: nothing changes.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"cut short": data[:len(data)-100],
		"flipped":   flip(data, len(data)/2),
		"not one":   []byte("hello"),
	} {
		bp := filepath.Join(t.TempDir(), "bad")
		if err := os.WriteFile(bp, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		bf, err := os.Open(bp)
		if err != nil {
			t.Fatal(err)
		}
		applied := l.FSM().AppliedIndex()
		_, _, err = l.RestoreBackup(ctx, bf)
		bf.Close()
		if !errors.Is(err, cluster.ErrBadBackup) {
			t.Fatalf("%s backup: %v, want cluster.ErrBadBackup", name, err)
		}
		if got := l.FSM().AppliedIndex(); got != applied || PendingOn(t, l, "b") != 3 {
			t.Fatalf("%s backup changed the keyspace: applied %d → %d", name, applied, got)
		}
	}

	rf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	_, from, err := l.RestoreBackup(ctx, rf)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "every replica to hold the backup's keyspace", func() bool {
		for _, n := range nodes {
			if n.FSM().AppliedIndex() < from || PendingOn(t, n, "a") != 10 || PendingOn(t, n, "b") != 0 {
				return false
			}
		}
		return true
	})
	// Entries may follow the restore (the feature latch the leader raises
	// again when the backup's level is below the cluster's, which deletes
	// the index ranges the level keeps in memory), so replicas agree once
	// each applied what the leader did: a divergence never does.
	testwait.Until(t, 10*time.Second, "every replica's hash to equal the leader's", func() string {
		return Divergence(t, l, nodes)
	})
	for _, id := range before {
		if _, err := l.FSM().GetTask(id); err != nil {
			t.Fatalf("task %s of the backup: %v", id, err)
		}
	}
	after := EnqueueN(t, ctx, l, "a", 1)[0]
	// Ids are the entry's index in fixed-width hex, then the position:
	// they sort as the log does.
	if last := before[len(before)-1]; after <= last || after <= fmt.Sprintf("%016x", h.Index) {
		t.Fatalf("task id %s after the restore; the backup's go up to %s (index %d)", after, last, h.Index)
	}
}

// Divergence names a replica whose keyspace hash differs from the
// leader's, "" when none does. Replicas that applied different indexes
// differ too, so a caller polls it (testwait.Until) until they agree,
// which a divergence never does.
func Divergence(t testing.TB, l *cluster.Node, nodes []*cluster.Node) string {
	t.Helper()
	want, err := l.FSM().Hash()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		got, err := n.FSM().Hash()
		if err != nil {
			t.Fatalf("hash of %s: %v", n.ID(), err)
		}
		if got != want {
			return fmt.Sprintf("%s hash %s at applied index %d, leader %s at %d", n.ID(), got, n.FSM().AppliedIndex(), want, l.FSM().AppliedIndex())
		}
	}
	return ""
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}
