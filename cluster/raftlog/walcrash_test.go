package raftlog

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// walCrashEnv names the wal dir Test_WALCrashHelper writes into; it is set
// only in the child that Test_WALStoreTailTruncationSurvivesKill starts.
const walCrashEnv = "DOCKET_WAL_CRASH_DIR"

// A follower that rejoins with uncommitted entries has Raft clear its log
// suffix. raft-wal v0.4.0 marked the truncated tail segment sealed without
// writing its index block, so the node, killed afterwards, could not open
// its log again ("sealed segment has no index block", raft-wal #31; a
// failover bench on --log-store wal lost the restarted leader this way).
// The child truncates a wal tail, appends the new leader's entries and is
// killed with SIGKILL; the wal must reopen with the new entries.
func Test_WALStoreTailTruncationSurvivesKill(t *testing.T) {
	dir := filepath.Join(t.TempDir(), WALDir)
	cmd := exec.Command(os.Args[0], "-test.run=^Test_WALCrashHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), walCrashEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // held open: the child waits on it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "wal-crash:") {
				ready <- line
				return
			}
		}
		close(ready)
	}()
	select {
	case line, ok := <-ready:
		if !ok || line != "wal-crash: ready" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child did not get ready: %q", line)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("child did not get ready in 30s")
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no Close runs
		t.Fatal(err)
	}
	_ = cmd.Wait()

	s, err := openCheckedWAL(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("wal after kill -9 following a tail truncation: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	last, err := s.LastIndex()
	if err != nil || last != walCrashLast {
		t.Fatalf("last index %d (%v), want %d", last, err, walCrashLast)
	}
	for i := uint64(1); i <= walCrashLast; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		want := walCrashData(i)
		if string(l.Data) != want {
			t.Fatalf("entry %d holds %q, want %q", i, l.Data, want)
		}
	}
}

// The child's log: entries 1..20 of term 1, then a new leader's entries
// 11..walCrashLast replace 11..20.
const walCrashLast = 15

func walCrashData(i uint64) string {
	if i > 10 {
		return fmt.Sprintf("new-leader-%d", i)
	}
	return fmt.Sprintf("old-%d", i)
}

// Test_WALCrashHelper is Test_WALStoreTailTruncationSurvivesKill's child;
// it does nothing in a normal run.
func Test_WALCrashHelper(t *testing.T) {
	dir := os.Getenv(walCrashEnv)
	if dir == "" {
		return
	}
	s, err := openCheckedWAL(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 20; i++ {
		if err := s.StoreLog(cmdLog(i, fmt.Sprintf("old-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// What Raft does for a follower whose suffix conflicts with the leader.
	if err := s.DeleteRange(11, 20); err != nil {
		t.Fatal(err)
	}
	for i := uint64(11); i <= walCrashLast; i++ {
		l := cmdLog(i, walCrashData(i))
		l.Term = 2
		if err := s.StoreLog(l); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("wal-crash: ready")
	// Hold the store open until the parent kills this process; its stdin
	// closes if the parent dies first, so the child never outlives it.
	_, _ = io.Copy(io.Discard, os.Stdin)
}
