package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_RestoreWakesWaiters: a snapshot restore tells the waiters on the
// node. A long-poll Claim on an empty queue and a WaitResult on a running
// task wake once a restore makes a task of that queue pending and that
// task completed, rather than sleep out their wait (a minute here).
// Before, no applied batch announced what the restore brought, so both
// slept on.
func Test_RestoreWakesWaiters(t *testing.T) {
	l := nodetest.Cluster(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := nodetest.EnqueueN(t, ctx, l, "a", 1)[0]
	older := saveBackup(t, ctx, l) // first pending, queue b empty
	claimed, err := l.Service().Claim(ctx, l.Service().ClaimCommand(&pb.ClaimRequest{Queue: "a", WorkerId: "w"}), 0)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	done := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SUBMIT, Body: &pb.Command_Submit{Submit: &pb.SubmitCmd{
		TaskId: first, Fence: claimed[0].GetFence(), Outcome: pb.Outcome_OUTCOME_COMPLETED}}}
	if _, err := l.Service().Propose(ctx, done); err != nil {
		t.Fatal(err)
	}
	second := nodetest.EnqueueN(t, ctx, l, "b", 1)[0]
	newer := saveBackup(t, ctx, l) // first completed, second pending in b
	restoreBackup(t, ctx, l, older)

	type answer struct {
		task *pb.Task
		err  error
	}
	claimCh, waitCh := make(chan answer, 1), make(chan answer, 1)
	go func() {
		tasks, err := l.Service().Claim(ctx, l.Service().ClaimCommand(&pb.ClaimRequest{Queue: "b", WorkerId: "w2"}), time.Minute)
		a := answer{err: err}
		if len(tasks) == 1 {
			a.task = tasks[0]
		}
		claimCh <- a
	}()
	go func() {
		tk, fin, err := l.Service().WaitResult(ctx, first, time.Minute)
		if !fin {
			tk = nil
		}
		waitCh <- answer{tk, err}
	}()
	testwait.For(t, 5*time.Second, "the claim and the wait to sleep", func() bool { _, _, w := l.Service().Waiting(); return w == 2 })

	restoreBackup(t, ctx, l, newer)
	for what, ch := range map[string]chan answer{"long-poll claim": claimCh, "WaitResult": waitCh} {
		select {
		case a := <-ch:
			if a.err != nil || a.task == nil {
				t.Fatalf("woken %s: %v %v; want a task", what, a.task, a.err)
			}
			if what == "long-poll claim" && a.task.GetId() != second {
				t.Fatalf("woken claim got %s, want %s", a.task.GetId(), second)
			}
			if what == "WaitResult" && a.task.GetState() != pb.TaskState_TASK_STATE_COMPLETED {
				t.Fatalf("woken WaitResult: %v", a.task.GetState())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the %s still sleeps 10 s after the restore", what)
		}
	}
}

func saveBackup(t *testing.T, ctx context.Context, n *cluster.Node) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "backup.snap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := n.SaveBackup(ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return path
}

func restoreBackup(t *testing.T, ctx context.Context, n *cluster.Node, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, err := n.RestoreBackup(ctx, f); err != nil {
		t.Fatal(err)
	}
}
