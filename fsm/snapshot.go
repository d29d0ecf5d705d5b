package fsm

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/storage"
)

// Snapshot captures the keyspace at the applied index. Raft calls it on the
// apply goroutine, so the Pebble snapshot is consistent with AppliedIndex;
// Persist then streams it from another goroutine while applies go on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return nil, errors.New("snapshot: fsm closed")
	}
	if err := f.LogFault(); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	s := &fsmSnapshot{f: f, snap: f.db.NewSnapshot(), applied: f.applied.Load()}
	f.snapMu.Lock()
	f.snaps[s] = struct{}{}
	f.snapMu.Unlock()
	return s, nil
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
}

// Persist streams every key behind the versioned header.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	err := s.read(func(r storage.Reader) error { return writeSnapshot(sink, r, s.applied) })
	if err != nil {
		return errors.Join(fmt.Errorf("persist snapshot at %d: %w", s.applied, err), sink.Cancel())
	}
	return sink.Close()
}

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

// Restore replaces the keyspace with a snapshot. It builds a fresh Pebble
// directory and swaps it in only once the whole stream arrived with a good
// checksum; a failed restore leaves the current state untouched.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	fs := f.opts.FS
	tmp := f.path(restoreDir)
	if err := fs.RemoveAll(tmp); err != nil {
		return fmt.Errorf("restore: clear %s: %w", tmp, err)
	}
	db, err := f.openDB(tmp)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	applied, err := loadSnapshot(db, rc)
	if err == nil {
		// Check the header against the keyspace before the swap, not after:
		// once swapped in, a failed restore could no longer leave the current
		// state untouched (found by Test_RestoreRejectsBadStreams).
		var got uint64
		got, err = storage.GetUint64(storage.Wrap(db), storage.KeyApplied)
		if err == nil && got != applied {
			err = fmt.Errorf("%w: header says index %d, keyspace says %d", storage.ErrBadSnapshot, applied, got)
		}
	}
	if err == nil {
		err = db.Flush()
	}
	if cerr := db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(fmt.Errorf("restore: %w", err), fs.RemoveAll(tmp))
	}
	if err := f.markComplete(tmp); err != nil {
		return fmt.Errorf("restore: %w", err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db != nil {
		f.closeSnapshots()
		err := f.db.Close()
		f.db = nil // closed even when Close reports an error
		if err != nil {
			return fmt.Errorf("restore: close current: %w", err)
		}
	}
	if err := f.recoverSwap(); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := f.openKeyspace(); err != nil {
		return fmt.Errorf("restore: reopen: %w", err)
	}
	if got := f.applied.Load(); got != applied {
		return fmt.Errorf("restore: header says index %d, keyspace says %d", applied, got)
	}
	f.log.Info("restored snapshot", "applied", applied)
	return nil
}

func loadSnapshot(db *pebble.DB, r io.Reader) (uint64, error) {
	const flushBytes = 4 << 20
	b := db.NewBatch()
	applied, err := storage.ReadSnapshot(r, func(k, v []byte) error {
		if err := b.Set(k, v, nil); err != nil {
			return err
		}
		if b.Len() < flushBytes {
			return nil
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return err
		}
		b.Reset()
		return nil
	})
	if err == nil {
		err = b.Commit(pebble.NoSync)
	}
	return applied, errors.Join(err, b.Close())
}

// markComplete writes and syncs the marker that makes a restore directory
// eligible to replace the live one.
func (f *FSM) markComplete(dir string) error {
	fs := f.opts.FS
	mf, err := fs.Create(fs.PathJoin(dir, doneMarker), "")
	if err != nil {
		return fmt.Errorf("marker: %w", err)
	}
	if err := errors.Join(mf.Sync(), mf.Close()); err != nil {
		return fmt.Errorf("marker: %w", err)
	}
	return nil
}

// recoverSwap moves a completed restore directory into place. It runs at
// Open and inside Restore. The marker travels with the directory and is
// removed last, so a crash at any step ends, on the next boot, with either
// the old keyspace or the complete new one, never neither.
func (f *FSM) recoverSwap() error {
	fs := f.opts.FS
	cur, tmp, old := f.path(dbDir), f.path(restoreDir), f.path(oldDir)
	exists := func(p string) (bool, error) {
		_, err := fs.Stat(p)
		if err == nil {
			return true, nil
		}
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("stat %s: %w", p, err)
	}
	curDone, err := exists(fs.PathJoin(cur, doneMarker))
	if err != nil {
		return err
	}
	tmpDone, err := exists(fs.PathJoin(tmp, doneMarker))
	if err != nil {
		return err
	}
	if !curDone && tmpDone {
		hasCur, err := exists(cur)
		if err != nil {
			return err
		}
		if hasCur {
			if err := fs.RemoveAll(old); err != nil {
				return fmt.Errorf("clear %s: %w", old, err)
			}
			if err := fs.Rename(cur, old); err != nil {
				return fmt.Errorf("retire %s: %w", cur, err)
			}
		}
		if err := fs.Rename(tmp, cur); err != nil {
			return fmt.Errorf("install %s: %w", tmp, err)
		}
		curDone = true
	}
	if curDone {
		if err := fs.Remove(fs.PathJoin(cur, doneMarker)); err != nil {
			return fmt.Errorf("drop marker: %w", err)
		}
		return errors.Join(fs.RemoveAll(old), fs.RemoveAll(tmp))
	}
	// No complete restore: drop any partial one. A retired db with no live
	// one can only come from an older layout; put it back rather than lose it.
	hasCur, err := exists(cur)
	if err != nil {
		return err
	}
	hasOld, err := exists(old)
	if err != nil {
		return err
	}
	if !hasCur && hasOld {
		if err := fs.Rename(old, cur); err != nil {
			return fmt.Errorf("reinstate %s: %w", old, err)
		}
	}
	return errors.Join(fs.RemoveAll(tmp), fs.RemoveAll(old))
}
