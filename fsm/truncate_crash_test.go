package fsm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/hashicorp/raft"
)

// Pebble has no WAL, so a crash keeps only what Pebble flushed, and the
// Raft log must still hold every entry above that. These tests run an FSM
// the way a node's Raft does (raftModel), crash it at the points where
// Raft truncates its log or Pebble writes to disk, and recover it the way
// a node boots: Pebble's applied index must reach the newest snapshot's
// (so the boot rule trusts it and restores nothing), and Raft's replay of
// the log from the snapshot's index on must end at the hash of a replica
// that never crashed.

// raftDisk is what hashicorp/raft holds on disk beside the FSM.
type raftDisk struct {
	first     uint64 // lowest index the log still holds: compactLogs deleted the rest
	snapIndex uint64 // newest snapshot's index; 0 before the first
}

// raftModel runs an FSM over a crashable filesystem as Raft does: it
// applies a log in random batches and, every snapEvery entries, takes a
// snapshot between two batches (the apply goroutine), persists it on
// another goroutine while applies go on, and then compacts the log up to
// the snapshot's index, TrailingLogs 0 being the most Raft ever compacts
// (snapshot.go's compactLogsWithTrailing).
type raftModel struct {
	t   *testing.T
	mem *vfs.MemFS
	f   *FSM
	cfg vfs.CrashCloneCfg

	mu    sync.Mutex // orders the crash image against compaction
	disk  raftDisk   // guarded by mu
	image *vfs.MemFS // guarded by mu: the disk at the crash, once taken
	at    raftDisk   // guarded by mu: Raft's disk at the crash

	// trigger, when set, is asked before each filesystem operation and
	// takes the crash image when it says so (a crash mid-flush).
	trigger atomic.Pointer[func(errorfs.Op) bool]
	// sinkCrash, when set, takes the image at the snapshot sink's first
	// write (a crash mid-snapshot, after Persist's flush).
	sinkCrash atomic.Bool
	// hook, when set, is called on the model's own steps.
	hook func(step string, k int)
	bg   sync.WaitGroup // the persists and flushes run starts
}

const modelDir = "/data/node/fsm"

func newRaftModel(t *testing.T, cfg vfs.CrashCloneCfg, window int) *raftModel {
	m := &raftModel{t: t, mem: vfs.NewCrashableMem(), cfg: cfg, disk: raftDisk{first: 1}}
	fs := errorfs.Wrap(m.mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if p := m.trigger.Load(); p != nil && (*p)(op) {
			m.crash()
		}
		return nil
	}))
	// The memtables hold the whole run: Pebble flushes only when asked
	// (Persist, the mid-flush crash point's own flush, Close), so each
	// crash point tests the rule alone, not Pebble's timing.
	m.f = mustOpen(t, modelDir, Options{FS: fs, CheckpointEntries: window})
	return m
}

// crash takes the crash image, once: what the disk holds and what Raft
// holds at this instant.
func (m *raftModel) crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.image == nil {
		m.image = m.mem.CrashClone(m.cfg)
		m.at = m.disk
	}
}

func (m *raftModel) crashed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.image != nil
}

func (m *raftModel) step(name string, k int) {
	if m.hook != nil {
		m.hook(name, k)
	}
}

// run applies logs until the crash image is taken, then stops the node.
// It reports whether the crash came at its point; if not, the image is
// taken at the end.
func (m *raftModel) run(logs []*raft.Log, rng *rand.Rand, snapEvery int) bool {
	persist := &m.bg
	defer persist.Wait() // on a Fatal too
	snaps, next := 0, snapEvery
	for i := 0; i < len(logs) && !m.crashed(); {
		m.step("batch", i)
		n := min(1+rng.IntN(64), len(logs)-i)
		m.f.ApplyBatch(logs[i : i+n])
		i += n
		if i < next {
			continue
		}
		next += snapEvery
		persist.Wait() // Raft persists one snapshot at a time (and a flush)
		snaps++
		snap, err := m.f.Snapshot()
		if err != nil {
			m.t.Fatal(err)
		}
		persist.Add(1)
		go func(k int, index uint64) { // owned by run, which waits for it
			defer persist.Done()
			defer snap.Release()
			m.step("persist", k)
			if err := snap.Persist(&crashSink{m: m}); err != nil {
				m.t.Errorf("persist snapshot %d: %v", k, err)
				return
			}
			m.step("persisted", k)
			m.mu.Lock()
			m.disk = raftDisk{first: index + 1, snapIndex: index}
			m.mu.Unlock()
			m.step("compacted", k)
		}(snaps, m.f.AppliedIndex())
	}
	persist.Wait()
	hit := m.crashed()
	m.crash()
	if err := m.f.Close(); err != nil {
		m.t.Fatal(err)
	}
	return hit
}

// flushInBackground starts a memtable flush while applies go on, as
// Pebble does when a memtable fills; run waits for it.
func (m *raftModel) flushInBackground() {
	m.bg.Add(1)
	go func() { // owned by run, through m.bg
		defer m.bg.Done()
		if err := m.f.db.Flush(); err != nil {
			m.t.Errorf("flush: %v", err)
		}
	}()
}

// crashSink is a snapshot sink that can take the crash image mid-stream.
type crashSink struct {
	bufSink
	m *raftModel
}

func (s *crashSink) Write(p []byte) (int, error) {
	if s.m.sinkCrash.Load() {
		s.m.crash()
	}
	return s.bufSink.Write(p)
}

// recover boots from the crash image as a node does and says what went
// wrong: the boot rule needing the snapshot, entries lost, or a final
// state other than want.
func (m *raftModel) recover(logs []*raft.Log, want string, rng *rand.Rand) error {
	m.mu.Lock()
	image, at := m.image, m.at
	m.mu.Unlock()
	g, err := Open(modelDir, Options{FS: image})
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	defer g.Close()
	durable := g.AppliedIndex()
	var errs []error
	if durable < at.snapIndex {
		errs = append(errs, fmt.Errorf("pebble holds index %d on disk, below the newest snapshot's %d", durable, at.snapIndex))
	}
	if durable+1 < at.first {
		errs = append(errs, fmt.Errorf("the log starts at %d: entries %d..%d are gone", at.first, durable+1, at.first-1))
	}
	// NoSnapshotRestoreOnStart: Raft sets lastApplied to the snapshot's
	// index and hands the FSM every entry after it; the FSM skips those at
	// or below its own applied index.
	applyInBatches(g, logs[at.snapIndex:], rng, 64)
	if got := mustHash(m.t, g); got != want || g.AppliedIndex() != uint64(len(logs)) {
		errs = append(errs, fmt.Errorf("recovered from %d (snapshot %d, log from %d): hash %.12s at %d, want %.12s at %d",
			durable, at.snapIndex, at.first, got, g.AppliedIndex(), want, len(logs)))
	}
	return errors.Join(errs...)
}

// crashPoint arms one crash of a run of n entries with a snapshot every
// snapEvery entries. Each comes after at least one compaction, so a
// missing flush before it would show.
type crashPoint struct {
	name string
	arm  func(m *raftModel, rng *rand.Rand, snapEvery, n int)
}

// onFlushOp returns a trigger that fires at the k-th flush operation.
func onFlushOp(k int) *func(errorfs.Op) bool {
	var seen atomic.Int64
	fn := func(op errorfs.Op) bool { return flushOp(op) && seen.Add(1) == int64(k) }
	return &fn
}

// flushOp matches what a flush does on disk: writing and syncing a table,
// then syncing the MANIFEST that names it. A crash before the MANIFEST's
// sync leaves the flush undone.
func flushOp(op errorfs.Op) bool {
	switch {
	case strings.HasSuffix(op.Path, ".sst"):
		return op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo
	case strings.Contains(op.Path, "MANIFEST"):
		return op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData
	}
	return false
}

var crashPoints = []crashPoint{
	// Between two apply batches.
	{"mid-apply", func(m *raftModel, rng *rand.Rand, snapEvery, n int) {
		at := 2*snapEvery + rng.IntN(n-2*snapEvery)
		m.hook = func(step string, i int) {
			if step == "batch" && i >= at {
				m.crash()
			}
		}
	}},
	// Inside a memtable flush that runs while applies go on (what Pebble
	// starts when a memtable fills), at its k-th write or sync.
	{"mid-flush", func(m *raftModel, rng *rand.Rand, snapEvery, n int) {
		at, k := 2*snapEvery+rng.IntN(n-3*snapEvery), 1+rng.IntN(4)
		m.hook = func(step string, i int) {
			if step == "batch" && i >= at && m.trigger.Load() == nil {
				m.trigger.Store(onFlushOp(k))
				m.flushInBackground()
			}
		}
	}},
	// Inside Persist's flush, at its k-th write or sync.
	{"mid-snapshot-flush", func(m *raftModel, rng *rand.Rand, snapEvery, n int) {
		snap, k := 2+rng.IntN(n/snapEvery-2), 1+rng.IntN(4)
		m.hook = func(step string, i int) {
			if step == "persist" && i == snap {
				m.trigger.Store(onFlushOp(k))
			}
		}
	}},
	// While Persist streams the snapshot, after its flush.
	{"mid-snapshot-stream", func(m *raftModel, rng *rand.Rand, snapEvery, n int) {
		snap := 2 + rng.IntN(n/snapEvery-2)
		m.hook = func(step string, i int) {
			if step == "persist" && i == snap {
				m.sinkCrash.Store(true)
			}
		}
	}},
	// After Persist returned, before Raft compacts the log.
	{"persisted-not-compacted", func(m *raftModel, rng *rand.Rand, snapEvery, n int) {
		snap := 2 + rng.IntN(n/snapEvery-2)
		m.hook = func(step string, i int) {
			if step == "persisted" && i == snap {
				m.crash()
			}
		}
	}},
	// Right after Raft compacted the log.
	{"right-after-compaction", func(m *raftModel, rng *rand.Rand, snapEvery, n int) {
		k := 1 + rng.IntN(n/snapEvery-1)
		m.hook = func(step string, i int) {
			if step == "compacted" && i == k {
				m.crash()
			}
		}
	}},
}

// crashRuns runs every crash point under power loss (unsynced writes
// dropped) and under kill -9 (the page cache survives; Pebble's memtables
// do not), and returns each run's recovery error by name. A run whose
// crash point never came is an error too.
func crashRuns(t *testing.T, window int) map[string]error {
	n := 3000
	if testing.Short() {
		n = 1200
	}
	const snapEvery = 300
	logs, want := crashLog(t, n)
	out := map[string]error{}
	for i, cp := range crashPoints {
		for _, unsynced := range []int{0, 100} {
			name := fmt.Sprintf("%s/unsynced=%d%%", cp.name, unsynced)
			seed := *seedFlag + uint64(100*i+unsynced)
			rng := rand.New(rand.NewPCG(seed, 7))
			m := newRaftModel(t, vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(seed, 8))}, window)
			cp.arm(m, rng, snapEvery, n)
			var missed error
			if !m.run(logs, rng, snapEvery) {
				missed = errors.New("the run ended before its crash point; crashed at the end")
			}
			out[name] = errors.Join(missed, m.recover(logs, want, rng))
		}
	}
	return out
}

// Test_CrashNeverLosesTheLogAbovePebble: wherever a node crashes (between
// applies, inside a flush, while a snapshot flushes or streams, and on
// either side of the log's compaction), Pebble's durable applied index
// is at least the newest snapshot's and the log holds every entry above
// it, so replaying the log recovers the state of a replica that never
// crashed. Without Persist's flush (the planted fault
// no-flush-before-truncate) it does not: Test_PlantedNoFlushBeforeTruncate.
func Test_CrashNeverLosesTheLogAbovePebble(t *testing.T) {
	for name, err := range crashRuns(t, 0) {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Test_CrashNeverLosesTheLogAboveACheckpointWindow is the same with
// checkpoint windows of 64 entries: a crash also loses the window that was
// open, which the log holds too, since nothing lets Raft remove entries
// before a checkpoint (checkpoint.go).
func Test_CrashNeverLosesTheLogAboveACheckpointWindow(t *testing.T) {
	for name, err := range crashRuns(t, 64) {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
