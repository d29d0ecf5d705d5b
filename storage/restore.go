package storage

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The names inside a Home directory.
const (
	// DBDir holds the live keyspace.
	DBDir = "db"
	// RestoreDir is where a snapshot is built before it replaces DBDir.
	RestoreDir = "restore"
	// OldDir holds a retired keyspace during the swap.
	OldDir = "old"
	// RestoreMarker, inside a directory, says that the restore built there
	// is complete and may replace the live keyspace.
	RestoreMarker = "RESTORE-COMPLETE"
)

// Home is the directory of one keyspace: the live Pebble database and the
// restore that may replace it. It owns the directory I/O around the FSM:
// creating the directory durably, building a restore, and the swap.
type Home struct {
	dir  string
	opts DBOptions
}

// OpenHome creates dir and its missing parents durably, and finishes a
// restore that a crash interrupted (InstallRestore), so that OpenLive
// then finds either the old keyspace or the complete new one.
func OpenHome(dir string, o DBOptions) (*Home, error) {
	h := &Home{dir: dir, opts: o.withDefaults()}
	if err := mkdirSynced(h.opts.FS, dir); err != nil {
		return nil, fmt.Errorf("keyspace dir %s: %w", dir, err)
	}
	if err := h.InstallRestore(); err != nil {
		return nil, err
	}
	return h, nil
}

// Dir is the directory the Home manages.
func (h *Home) Dir() string { return h.dir }

func (h *Home) path(name string) string { return h.opts.FS.PathJoin(h.dir, name) }

// OpenLive opens the live keyspace, creating it when absent.
func (h *Home) OpenLive() (*pebble.DB, error) { return OpenDB(h.path(DBDir), h.opts) }

// BuildRestore writes the snapshot stream r into a fresh restore directory
// and marks it complete once the whole stream arrived with a good checksum
// and its header agrees with the keyspace it built. It returns the
// snapshot's applied index. On error it removes what it built, and the
// live keyspace is untouched either way: InstallRestore swaps it in.
func (h *Home) BuildRestore(r io.Reader) (uint64, error) {
	fs := h.opts.FS
	tmp := h.path(RestoreDir)
	if err := fs.RemoveAll(tmp); err != nil {
		return 0, fmt.Errorf("clear %s: %w", tmp, err)
	}
	db, err := OpenDB(tmp, h.opts)
	if err != nil {
		return 0, err
	}
	applied, err := loadSnapshot(db, r)
	if err == nil {
		// Check the header against the keyspace before the swap, not after:
		// once swapped in, a failed restore could no longer leave the current
		// state untouched (found by fsm's Test_RestoreRejectsBadStreams).
		var got uint64
		got, err = GetUint64(Wrap(db), KeyApplied)
		if err == nil && got != applied {
			err = fmt.Errorf("%w: header says index %d, keyspace says %d", ErrBadSnapshot, applied, got)
		}
	}
	if err == nil {
		// The WAL is off (OpenDB): without the flush the restored keys
		// would die with the memtable at Close. Raft compacts its log up to
		// the snapshot's index once Restore returns, so the restore must be
		// on disk before the marker says it is complete.
		err = Flush(db, FlushTimeout)
	}
	if cerr := db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return 0, errors.Join(err, fs.RemoveAll(tmp))
	}
	if err := h.markComplete(tmp); err != nil {
		return 0, err
	}
	return applied, nil
}

func loadSnapshot(db *pebble.DB, r io.Reader) (uint64, error) {
	const flushBytes = 4 << 20
	b := db.NewBatch()
	applied, err := ReadSnapshot(r, func(k, v []byte) error {
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
func (h *Home) markComplete(dir string) error {
	fs := h.opts.FS
	mf, err := fs.Create(fs.PathJoin(dir, RestoreMarker), "")
	if err != nil {
		return fmt.Errorf("marker: %w", err)
	}
	if err := errors.Join(mf.Sync(), mf.Close()); err != nil {
		return fmt.Errorf("marker: %w", err)
	}
	return nil
}

// InstallRestore moves a completed restore directory into place; the live
// database must be closed. OpenHome runs it too. The marker travels with
// the directory and is removed last, so a crash at any step ends, on the
// next boot, with either the old keyspace or the complete new one, never
// neither.
func (h *Home) InstallRestore() error {
	fs := h.opts.FS
	cur, tmp, old := h.path(DBDir), h.path(RestoreDir), h.path(OldDir)
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
	curDone, err := exists(fs.PathJoin(cur, RestoreMarker))
	if err != nil {
		return err
	}
	tmpDone, err := exists(fs.PathJoin(tmp, RestoreMarker))
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
		if err := fs.Remove(fs.PathJoin(cur, RestoreMarker)); err != nil {
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

// mkdirSynced creates dir and its missing parents, then syncs every parent
// that gained an entry. Pebble syncs only the directory that holds its own,
// so without this a power loss soon after the first boot could drop the
// whole keyspace directory although everything inside it was synced (found
// by fsm's Test_CleanCloseSurvivesPowerLoss).
func mkdirSynced(fs vfs.FS, dir string) error {
	var parents []string
	for p := dir; ; {
		_, err := fs.Stat(p)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		parent := fs.PathDir(p)
		if parent == p {
			break
		}
		parents = append(parents, parent)
		p = parent
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, p := range parents {
		if err := syncDir(fs, p); err != nil {
			return err
		}
	}
	return nil
}

// syncDir makes the entries of directory dir durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	if err := errors.Join(d.Sync(), d.Close()); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
