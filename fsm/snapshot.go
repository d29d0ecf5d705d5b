package fsm

import (
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/storage"
)

// Snapshot captures the keyspace at the applied index. Raft calls it on the
// apply goroutine, so the Pebble snapshot is consistent with AppliedIndex;
// Persist then streams it from another goroutine while applies go on.
//
// Persist of a snapshot from Snapshot first flushes Pebble: Raft compacts
// its log up to the snapshot's index once Persist returns, and Pebble,
// which has no WAL, holds on disk only what it flushed. The flush makes
// Pebble's durable applied index at least the snapshot's, so the log
// still holds every entry a crash could take from Pebble.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return f.snapshot(true)
}

// snapshot is Snapshot; durable says whether Persist must flush Pebble
// first (a snapshot Raft may compact its log behind).
func (f *FSM) snapshot(durable bool) (*fsmSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return nil, errors.New("snapshot: fsm closed")
	}
	if err := f.LogFault(); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if !planted("snapshot-skips-window") {
		f.checkpoint() // the snapshot is of Pebble, at the applied index
	}
	s := &fsmSnapshot{f: f, snap: f.db.NewSnapshot(), applied: f.applied.Load(), durable: durable}
	f.snapMu.Lock()
	f.snaps[s] = struct{}{}
	f.snapMu.Unlock()
	return s, nil
}

// Backup is Snapshot for a caller outside Raft's apply goroutine (a
// backup): applies may commit while it runs, so the index comes from the
// Pebble snapshot's own m/applied rather than from AppliedIndex, and the
// two always agree. It returns that index. No log is compacted behind a
// backup, so its Persist does not flush.
func (f *FSM) Backup() (raft.FSMSnapshot, uint64, error) {
	s, err := f.snapshot(false)
	if err != nil {
		return nil, 0, err
	}
	err = s.read(func(r storage.Reader) error {
		applied, err := storage.GetUint64(r, storage.KeyApplied)
		s.applied = applied
		return err
	})
	if err != nil {
		s.Release()
		return nil, 0, fmt.Errorf("backup: read applied index: %w", err)
	}
	return s, s.applied, nil
}

// errSnapshotReplaced means the keyspace a snapshot was taken from was
// closed or replaced by a Restore before the snapshot was persisted.
var errSnapshotReplaced = errors.New("fsm snapshot outlived its keyspace")

// fsmSnapshot is a Pebble snapshot registered with its FSM. Raft takes it
// on the apply goroutine and persists it later from another one, and a
// Restore or Close can come in between: Raft's snapshot goroutine waits on
// its main loop before Persist, and that loop may itself be waiting for
// the Restore, so Restore must not wait for an unpersisted snapshot.
// Instead Restore and Close close the Pebble snapshots not yet streaming
// (closeSnapshots) and their Persist fails; a Persist already streaming
// holds f.mu's read lock, so it finishes first. Before this, Restore with a
// snapshot outstanding failed on "leaked snapshots" and left a closed
// database in place (found by Test_RestoreWhileSnapshotUnpersisted).
type fsmSnapshot struct {
	f       *FSM
	snap    *pebble.Snapshot // nil once closed; guarded by f.snapMu
	applied uint64
	durable bool // Persist flushes Pebble first (Snapshot)
}

// Persist streams every key behind the versioned header. For a snapshot
// Raft took, it first flushes Pebble (Snapshot says why); a failed flush
// fails Persist, and Raft then keeps its log.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	cw := &countingWriter{w: sink}
	err := s.read(func(r storage.Reader) error {
		if s.durable && !planted("no-flush-before-truncate") {
			// s.read holds f.mu and s.snap is open, so f.db is the
			// database the snapshot was taken from.
			if err := storage.Flush(s.f.db, storage.FlushTimeout); err != nil {
				return fmt.Errorf("flush before the log is compacted: %w", err)
			}
		}
		return writeSnapshot(cw, r, s.applied)
	})
	if err != nil {
		return errors.Join(fmt.Errorf("persist snapshot at %d: %w", s.applied, err), sink.Cancel())
	}
	if err := sink.Close(); err != nil {
		return err
	}
	s.f.snapBytes.Store(cw.n)
	return nil
}

// countingWriter counts what passes through to w.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// SnapshotBytes is the size of the last snapshot this FSM persisted (a
// Raft snapshot or a backup); 0 before the first.
func (f *FSM) SnapshotBytes() int64 { return f.snapBytes.Load() }

// Release frees the Pebble snapshot. It is safe after the FSM closed it.
func (s *fsmSnapshot) Release() {
	s.f.snapMu.Lock()
	defer s.f.snapMu.Unlock()
	if s.snap == nil {
		return
	}
	// Close only fails on a double close, which the nil check rules out.
	_ = s.snap.Close()
	s.snap = nil
	delete(s.f.snaps, s)
}

// closeSnapshots closes every registered snapshot before the database
// goes away. The caller holds f.mu for writing, so none is streaming.
func (f *FSM) closeSnapshots() {
	f.snapMu.Lock()
	defer f.snapMu.Unlock()
	for s := range f.snaps {
		_ = s.snap.Close() // see Release
		s.snap = nil
	}
	clear(f.snaps)
}

func writeSnapshot(w io.Writer, r storage.Reader, applied uint64) error {
	sw, err := storage.NewSnapshotWriter(w, applied)
	if err != nil {
		return err
	}
	if err := storage.Scan(r, nil, nil, 0, sw.Add); err != nil {
		return err
	}
	return sw.Close()
}

// Restore replaces the keyspace with a snapshot. storage builds a fresh
// Pebble directory from the stream (Home.BuildRestore), and only once the
// whole stream arrived with a good checksum does the FSM close its
// database and let storage swap the new one in; a failed restore leaves
// the current state untouched.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	applied, err := f.home.BuildRestore(rc)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	// Until the new keyspace is open the claim view describes the old
	// one: ClaimView answers "due" meanwhile, and for good if the swap
	// fails. openKeyspace rebuilds it.
	f.claims.markStale()
	f.dropWindow() // the restored keyspace replaces what it held
	if f.db != nil {
		f.closeSnapshots()
		err := f.db.Close()
		f.db = nil // closed even when Close reports an error
		if err != nil {
			return fmt.Errorf("restore: close current: %w", err)
		}
	}
	if err := f.home.InstallRestore(); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := f.openKeyspace(); err != nil {
		return fmt.Errorf("restore: reopen: %w", err)
	}
	if got := f.applied.Load(); got != applied {
		return fmt.Errorf("restore: header says index %d, keyspace says %d", applied, got)
	}
	f.log.Info("restored snapshot", "applied", applied)
	if fn := f.observer.Load(); fn != nil {
		// Waiters look again: the new keyspace may hold claimable tasks
		// and finished ones that no applied batch announced.
		(*fn)(Event{Index: applied, Restored: true})
	}
	return nil
}
