//go:build system

package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// killDirEnv names the directory Test_KillHelper runs a node in; it is set
// only in the child that killRun starts.
const killDirEnv = "DOCKET_FSM_KILL_DIR"

const (
	killEntries   = 3000
	killSnapEvery = 300
)

// Test_SystemKillNineKeepsTheLogAbovePebble is Test_CrashNeverLosesTheLogAbovePebble
// with a real kill -9 on the machine's disk: a child process runs a node
// the way Raft does (applies, a snapshot every 300 entries persisted to a
// file, then the log's compaction recorded durably) and is killed with
// SIGKILL right after it reports a chosen step. Its page cache survives,
// its memtables do not. Pebble's applied index must reach the newest
// snapshot's and the log above it must replay to the hash of a replica
// that never crashed.
func Test_SystemKillNineKeepsTheLogAbovePebble(t *testing.T) {
	before := killHelperDirs(t)
	for _, err := range killRuns(t, nil) {
		if err != nil {
			t.Error(err)
		}
	}
	if after := killHelperDirs(t); after > before {
		t.Errorf("the killed children left %d directories in %s", after-before, os.TempDir())
	}
}

// killHelperDirs counts the test directories Test_KillHelper children left
// in the machine's temporary directory: a child killed with SIGKILL runs no
// cleanup, so one that made its directories there would leave them behind
// on every run.
func killHelperDirs(t *testing.T) int {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(os.TempDir(), "Test_KillHelper*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(left)
}

// killRuns kills a child at each of a few steps and returns what each
// recovery found wrong (nil when nothing); env goes to the child.
func killRuns(t *testing.T, env []string) []error {
	logs, want := crashLog(t, killEntries)
	rng := rand.New(rand.NewPCG(*seedFlag, 21))
	steps := []string{
		fmt.Sprintf("batch %d", 2*killSnapEvery+rng.IntN(killEntries-3*killSnapEvery)),
		fmt.Sprintf("persisted %d", 2+rng.IntN(killEntries/killSnapEvery-2)),
		fmt.Sprintf("compacted %d", 2+rng.IntN(killEntries/killSnapEvery-2)),
		fmt.Sprintf("compacted %d", 2+rng.IntN(killEntries/killSnapEvery-2)),
	}
	var out []error
	for _, step := range steps {
		dir := t.TempDir()
		killAt(t, dir, step, env)
		if err := recoverKilled(t, dir, logs, want); err != nil {
			out = append(out, fmt.Errorf("killed after %q: %w", step, err))
		} else {
			out = append(out, nil)
		}
	}
	return out
}

// killAt starts Test_KillHelper in dir and kills it with SIGKILL once it
// printed a line starting with step.
func killAt(t *testing.T, dir, step string, env []string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^Test_KillHelper$", "-test.count=1", "-test.v", "-fsm.seed="+fmt.Sprint(*seedFlag))
	// The child's own test directories go under the parent's, which the
	// parent removes: the child is killed before its cleanups run.
	cmd.Env = append(append(os.Environ(), killDirEnv+"="+dir, "TMPDIR="+t.TempDir()), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // held open: the child waits on it at the end
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reached := make(chan bool, 1)
	go func() { // ends when the child's stdout closes
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if stepReached(sc.Text(), step) {
				reached <- true
				_, _ = io.Copy(io.Discard, out)
				return
			}
			if sc.Text() == "kill: done" {
				break
			}
		}
		reached <- false
	}()
	var ok bool
	select {
	case ok = <-reached:
	case <-time.After(60 * time.Second):
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: nothing is flushed
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !ok {
		t.Fatalf("the child never reported %q", step)
	}
}

// stepReached says whether the child's line reports step: the same step,
// or for "batch N" any batch ending at N or later.
func stepReached(line, step string) bool {
	if line == "kill: "+step {
		return true
	}
	var want, got int
	if _, err := fmt.Sscanf(step, "batch %d", &want); err != nil {
		return false
	}
	_, err := fmt.Sscanf(line, "kill: batch %d", &got)
	return err == nil && got >= want
}

// recoverKilled boots from what the killed child left, as a node does.
func recoverKilled(t *testing.T, dir string, logs []*raft.Log, want string) error {
	first, snapIndex, err := readRaftState(dir)
	if err != nil {
		return err
	}
	g, err := Open(filepath.Join(dir, "fsm"), Options{})
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	defer g.Close()
	durable := g.AppliedIndex()
	t.Logf("after the kill: pebble at %d, newest snapshot %d, log from %d", durable, snapIndex, first)
	var errs []error
	if durable < snapIndex {
		errs = append(errs, fmt.Errorf("pebble holds index %d on disk, below the newest snapshot's %d", durable, snapIndex))
	}
	if durable+1 < first {
		errs = append(errs, fmt.Errorf("the log starts at %d: entries %d..%d are gone", first, durable+1, first-1))
	}
	applyInBatches(g, logs[snapIndex:], rand.New(rand.NewPCG(1, 2)), 64)
	if got := mustHash(t, g); got != want || g.AppliedIndex() != uint64(len(logs)) {
		errs = append(errs, fmt.Errorf("recovered from %d (snapshot %d, log from %d): hash %.12s at %d, want %.12s at %d",
			durable, snapIndex, first, got, g.AppliedIndex(), want, len(logs)))
	}
	return errors.Join(errs...)
}

// Test_KillHelper is the child of killAt; it does nothing in a normal run.
func Test_KillHelper(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		return
	}
	logs, _ := crashLog(t, killEntries)
	f := mustOpen(t, filepath.Join(dir, "fsm"), Options{})
	rng := rand.New(rand.NewPCG(*seedFlag, 22))
	snaps, next := 0, killSnapEvery
	for i := 0; i < len(logs); {
		n := min(1+rng.IntN(64), len(logs)-i)
		f.ApplyBatch(logs[i : i+n])
		i += n
		fmt.Printf("kill: batch %d\n", i)
		if i < next {
			continue
		}
		next += killSnapEvery
		snaps++
		index := f.AppliedIndex()
		snap, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		sink := &fileSink{path: filepath.Join(dir, "snapshot")}
		if err := snap.Persist(sink); err != nil {
			t.Fatal(err)
		}
		snap.Release()
		fmt.Printf("kill: persisted %d\n", snaps)
		if err := writeRaftState(dir, index+1, index); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("kill: compacted %d\n", snaps)
	}
	fmt.Println("kill: done")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent kills this process
}

// fileSink is a raft.SnapshotSink writing one file, synced and renamed
// into place at Close, as raft's FileSnapshotStore does.
type fileSink struct {
	path string
	buf  []byte
}

func (s *fileSink) Write(p []byte) (int, error) { s.buf = append(s.buf, p...); return len(p), nil }
func (s *fileSink) ID() string                  { return "kill" }
func (s *fileSink) Cancel() error               { return nil }
func (s *fileSink) Close() error                { return writeSynced(s.path, s.buf) }

// writeRaftState records, durably, what Raft's compaction leaves: the
// log's first index and the newest snapshot's index.
func writeRaftState(dir string, first, snapIndex uint64) error {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], first)
	binary.BigEndian.PutUint64(b[8:], snapIndex)
	return writeSynced(filepath.Join(dir, "raft-state"), b[:])
}

func readRaftState(dir string) (first, snapIndex uint64, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "raft-state"))
	if errors.Is(err, os.ErrNotExist) {
		return 1, 0, nil
	}
	if err != nil || len(b) != 16 {
		return 0, 0, fmt.Errorf("raft state: %d bytes, %v", len(b), err)
	}
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]), nil
}

// writeSynced replaces path with b: a synced temporary file renamed into
// place, then the directory synced.
func writeSynced(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
