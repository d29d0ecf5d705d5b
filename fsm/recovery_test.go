package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/storage"
)

// crashLog is a workload log and the hash of a replica that applied it all
// without crashing.
func crashLog(t *testing.T, n int) ([]*raft.Log, string) {
	t.Helper()
	ref := newHarness(t)
	logs, _ := generate(t, ref.f, *seedFlag+10, n, nil)
	return logs, mustHash(t, ref.f)
}

// Test_CrashRecovery applies a log on a crashable in-memory filesystem,
// simulates power loss at several points (unsynced writes dropped, kept,
// or half kept), reopens from the crashed copy and replays from its
// applied index: every run must end at the uncrashed replica's hash, and
// state made durable by a flush must survive.
func Test_CrashRecovery(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 800
	}
	logs, want := crashLog(t, n)
	rng := rand.New(rand.NewPCG(*seedFlag, 11))
	for run := 0; run < 6; run++ {
		crashAt := 1 + rng.IntN(len(logs))
		flushAt := rng.IntN(crashAt + 1) // entries made durable by a flush; 0 means none
		unsynced := []int{0, 50, 100}[run%3]
		t.Run(fmt.Sprintf("crash@%d/flush@%d/unsynced=%d%%", crashAt, flushAt, unsynced), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			const dir = "/var/lib/docket/fsm"
			f := mustOpen(t, dir, Options{FS: fs})
			if flushAt > 0 {
				applyInBatches(f, logs[:flushAt], rng, 64)
				if err := f.db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			applyInBatches(f, logs[flushAt:crashAt], rng, 64)
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(uint64(run), 1))})
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}

			g := mustOpen(t, dir, Options{FS: crashed})
			got := g.AppliedIndex()
			if got < uint64(flushAt) || got > uint64(crashAt) {
				t.Fatalf("after crash: applied %d, want within [%d, %d]", got, flushAt, crashAt)
			}
			checkKeyspace(t, g)
			applyInBatches(g, logs[got:], rng, 64)
			if h := mustHash(t, g); h != want {
				t.Fatalf("replica recovered at %d ends with hash %s, want %s", got, h, want)
			}
		})
	}
}

// Test_CleanCloseSurvivesPowerLoss: everything applied before a clean
// Close is on disk, directory entries included.
func Test_CleanCloseSurvivesPowerLoss(t *testing.T) {
	logs, _ := crashLog(t, 200)
	fs := vfs.NewCrashableMem()
	const dir = "/data/node1/fsm"
	f := mustOpen(t, dir, Options{FS: fs})
	f.ApplyBatch(logs)
	want := mustHash(t, f)
	if err := f.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g := mustOpen(t, dir, Options{FS: fs.CrashClone(vfs.CrashCloneCfg{})})
	if g.AppliedIndex() != uint64(len(logs)) || mustHash(t, g) != want {
		t.Fatalf("after power loss: applied %d, want %d", g.AppliedIndex(), len(logs))
	}
}

// Test_RestoreSurvivesPowerLoss: once Restore returns, the restored state
// is what a reboot finds.
func Test_RestoreSurvivesPowerLoss(t *testing.T) {
	logs, _ := crashLog(t, 300)
	src := newHarness(t)
	src.f.ApplyBatch(logs)
	snap, want := mustSnapshot(t, src.f), mustHash(t, src.f)

	fs := vfs.NewCrashableMem()
	const dir = "/data/fsm"
	f := mustOpen(t, dir, Options{FS: fs})
	f.ApplyBatch(logs[:50])
	if err := f.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := restoreFrom(f, snap); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	g := mustOpen(t, dir, Options{FS: crashed})
	if g.AppliedIndex() != uint64(len(logs)) || mustHash(t, g) != want {
		t.Fatalf("after power loss: applied %d, want the restored %d", g.AppliedIndex(), len(logs))
	}
	checkDirs(t, crashed, dir)
}

// checkDirs asserts that dir holds only the live database, without marker.
func checkDirs(t *testing.T, fs vfs.FS, dir string) {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{dbDir}) {
		t.Errorf("%s holds %v, want only %s", dir, names, dbDir)
	}
	if _, err := fs.Stat(fs.PathJoin(dir, dbDir, doneMarker)); err == nil {
		t.Errorf("restore marker left in the live database")
	}
}

// Test_RestoreRejectsBadStreams: a truncated, corrupted, inconsistent or
// failing snapshot stream fails Restore and leaves the old state serving.
func Test_RestoreRejectsBadStreams(t *testing.T) {
	logs, _ := crashLog(t, 300)
	src := newHarness(t)
	src.f.ApplyBatch(logs)
	good := mustSnapshot(t, src.f)
	corrupt := func(i int) []byte {
		b := append([]byte{}, good...)
		b[i] ^= 0x20
		return b
	}
	// A stream with a valid checksum whose header disagrees with the
	// keyspace's applied index.
	var mismatched bytes.Buffer
	w, err := storage.NewSnapshotWriter(&mismatched, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(storage.KeyApplied, storage.PutUint64(nil, 7)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]io.Reader{
		"empty":                 bytes.NewReader(nil),
		"header only":           bytes.NewReader(good[:20]),
		"cut mid-stream":        bytes.NewReader(good[:len(good)/2]),
		"no checksum":           bytes.NewReader(good[:len(good)-4]),
		"flipped byte":          bytes.NewReader(corrupt(len(good) / 3)),
		"flipped checksum":      bytes.NewReader(corrupt(len(good) - 1)),
		"reader error":          io.MultiReader(bytes.NewReader(good[:len(good)/2]), iotest.ErrReader(errors.New("connection reset"))),
		"header says other idx": bytes.NewReader(mismatched.Bytes()),
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			for _, l := range logs[:100] {
				h.f.Apply(l)
			}
			h.index = 100
			before, applied := mustHash(t, h.f), h.f.AppliedIndex()
			if err := h.f.Restore(io.NopCloser(r)); err == nil {
				t.Fatal("Restore accepted a bad stream")
			}
			if mustHash(t, h.f) != before || h.f.AppliedIndex() != applied {
				t.Fatal("failed Restore changed the state")
			}
			checkDirs(t, vfs.Default, h.dir)
			h.f.ApplyBatch(logs[100:])
			checkKeyspace(t, h.f)
		})
	}
}

// Test_RecoverSwapAfterCrashAtEachStep builds, by hand, the directories a
// crash leaves after each step of Restore's swap, and opens them: the FSM
// must come up with the old state before the restore was marked complete
// and the new state after, and tidy up.
func Test_RecoverSwapAfterCrashAtEachStep(t *testing.T) {
	logs, _ := crashLog(t, 200)
	// Two databases to move around: the live one and a restored one.
	base := vfs.NewMem()
	build := func(name string, n int) string {
		f, err := Open(name, Options{FS: base})
		if err != nil {
			t.Fatal(err)
		}
		f.ApplyBatch(logs[:n])
		h := mustHash(t, f)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return h
	}
	oldHash, newHash := build("/old", 50), build("/new", 200)
	const (
		live    = "live"    // an old-state database
		fresh   = "fresh"   // a new-state database
		marked  = "marked"  // a new-state database with the marker
		garbage = "garbage" // a half-written directory
	)
	cases := []struct {
		name   string
		layout map[string]string // dir -> content
		want   string
	}{
		{"first boot", map[string]string{}, ""},
		{"clean", map[string]string{dbDir: live}, oldHash},
		{"crash while streaming", map[string]string{dbDir: live, restoreDir: garbage}, oldHash},
		{"crash after stream, before marker", map[string]string{dbDir: live, restoreDir: fresh}, oldHash},
		{"crash after marker", map[string]string{dbDir: live, restoreDir: marked}, newHash},
		{"crash after retiring the live db", map[string]string{oldDir: live, restoreDir: marked}, newHash},
		{"crash after installing", map[string]string{oldDir: live, dbDir: marked}, newHash},
		{"crash after dropping the marker", map[string]string{oldDir: live, dbDir: fresh}, newHash},
		{"stale old dir beside a live db", map[string]string{oldDir: garbage, dbDir: live}, oldHash},
		{"only a retired db", map[string]string{oldDir: live}, oldHash},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			const dir = "/fsm"
			if err := fs.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, content := range c.layout {
				dst := fs.PathJoin(dir, name)
				switch content {
				case live, fresh, marked:
					src := "/new/db"
					if content == live {
						src = "/old/db"
					}
					if _, err := vfs.Clone(base, fs, src, dst); err != nil {
						t.Fatal(err)
					}
					if content == marked {
						mustTouch(t, fs, fs.PathJoin(dst, doneMarker))
					}
				case garbage:
					if err := fs.MkdirAll(dst, 0o755); err != nil {
						t.Fatal(err)
					}
					mustTouch(t, fs, fs.PathJoin(dst, "000001.log"))
				}
			}
			f := mustOpen(t, dir, Options{FS: fs})
			want := c.want
			if want == "" {
				empty := newHarness(t)
				want = mustHash(t, empty.f)
			}
			if got := mustHash(t, f); got != want {
				t.Fatalf("opened hash %s, want %s", got, want)
			}
			checkKeyspace(t, f)
			checkDirs(t, fs, dir)
		})
	}
}

func mustTouch(t *testing.T, fs vfs.FS, path string) {
	t.Helper()
	f, err := fs.Create(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
