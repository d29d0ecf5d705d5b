package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

func enqueueN(t *testing.T, ctx context.Context, l *Node, queue string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		res, err := l.Service().Propose(ctx, enqueueCmd(queue, fmt.Sprint(i)))
		if err != nil || pb.ResultError(res) != nil {
			t.Fatalf("enqueue %s %d: %v %v", queue, i, res, err)
		}
		ids = append(ids, res.GetItems()[0].GetTaskId())
	}
	return ids
}

func pendingOn(t *testing.T, n *Node, queue string) uint64 {
	t.Helper()
	p, _, err := n.FSM().Counts(queue, "default")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Test_BackupRestoreRoundTrip is issue 12's `docket snapshot save|restore`
// at the cluster level: a restore brings every replica back to the
// backup's keyspace (the writes after it are gone, on every node, with
// equal hashes), and the cluster goes on with ids above the backup's.
func Test_BackupRestoreRoundTrip(t *testing.T) {
	backupRestoreRoundTrip(t, mustCluster(t, 3))
}

func backupRestoreRoundTrip(t *testing.T, nodes []*Node) {
	l := leaderOf(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := enqueueN(t, ctx, l, "a", 10)

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
	enqueueN(t, ctx, l, "a", 5)
	enqueueN(t, ctx, l, "b", 3)

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
		if !errors.Is(err, ErrBadBackup) {
			t.Fatalf("%s backup: %v, want ErrBadBackup", name, err)
		}
		if got := l.FSM().AppliedIndex(); got != applied || pendingOn(t, l, "b") != 3 {
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
			if n.FSM().AppliedIndex() < from || pendingOn(t, n, "a") != 10 || pendingOn(t, n, "b") != 0 {
				return false
			}
		}
		return true
	})
	want, err := l.FSM().Hash()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if got, _ := n.FSM().Hash(); got != want {
			t.Fatalf("%s hash %s after restore, leader %s", n.ID(), got, want)
		}
	}
	for _, id := range before {
		if _, err := l.FSM().GetTask(id); err != nil {
			t.Fatalf("task %s of the backup: %v", id, err)
		}
	}
	after := enqueueN(t, ctx, l, "a", 1)[0]
	// Ids are the entry's index in fixed-width hex, then the position:
	// they sort as the log does.
	if last := before[len(before)-1]; after <= last || after <= fmt.Sprintf("%016x", h.Index) {
		t.Fatalf("task id %s after the restore; the backup's go up to %s (index %d)", after, last, h.Index)
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}
