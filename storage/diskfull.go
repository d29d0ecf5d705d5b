package storage

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrDiskFull means the keyspace cannot open because its disk has no room
// for what an open writes (a new MANIFEST, OPTIONS). Nothing on disk was
// lost: once space is freed the same data dir opens with what it held.
var ErrDiskFull = errors.New("disk full")

// DiskFullError is ErrDiskFull with what an operator needs to act: the
// directory, the space free on its disk and the space a node needs there.
type DiskFullError struct {
	Dir  string
	Free uint64 // bytes available to this process; 0 when unknown
	Need uint64 // bytes the node needs free to open and flush
	Err  error  // what Pebble reported
}

func (e *DiskFullError) Error() string {
	free := "unknown"
	if e.Free > 0 {
		free = mib(e.Free)
	}
	return fmt.Sprintf("the disk of %s is full (%s free, a node needs at least %s): free space there, or move the data dir to a larger disk, and start again; nothing it held is lost", e.Dir, free, mib(e.Need))
}

func (e *DiskFullError) Unwrap() []error { return []error{ErrDiskFull, e.Err} }

func mib(n uint64) string { return fmt.Sprintf("%d MiB", (n+1<<20-1)>>20) }

// needFree is what a node needs free to open its keyspace and then flush
// both memtables: their size, and room for the MANIFEST and OPTIONS
// files an open writes.
func needFree(memBytes uint64) uint64 { return 2*memBytes + 4<<20 }

// checkFree refuses to open a keyspace on a disk without the room an open
// and its first flushes need. Pebble writes its new MANIFEST from a flush
// goroutine soon after Open returns, and on a full disk reports that as
// fatal there, where no caller can recover: the node died with a
// goroutine dump at every start. A disk whose usage cannot be read is
// let through.
func checkFree(path string, fs vfs.FS, memBytes uint64) error {
	u, err := fs.GetDiskUsage(existingParent(fs, path))
	if err != nil || u.AvailBytes >= needFree(memBytes) {
		return nil
	}
	return &DiskFullError{Dir: path, Free: u.AvailBytes, Need: needFree(memBytes), Err: syscall.ENOSPC}
}

// existingParent is path, or its nearest ancestor that exists: a fresh
// data dir's disk is its parent's.
func existingParent(fs vfs.FS, path string) string {
	for p := path; ; {
		if _, err := fs.Stat(p); err == nil {
			return p
		}
		parent := fs.PathDir(p)
		if parent == p {
			return p
		}
		p = parent
	}
}

// openPebble is pebble.Open on a disk with room for it (checkFree), which
// also turns a full disk met during the open itself into the same error:
// Pebble reports a MANIFEST it cannot write as fatal, which pebbleLogger
// panics with, and the operator saw a goroutine dump instead of a
// sentence. A fatal report of anything but a full disk still panics.
func openPebble(path string, po *pebble.Options, fs vfs.FS, memBytes uint64) (db *pebble.DB, err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		fe, ok := r.(*FatalError)
		if !ok || !isNoSpace(fe.Msg) {
			panic(r)
		}
		err = diskFull(path, fs, memBytes, fe)
	}()
	if err := checkFree(path, fs, memBytes); err != nil {
		return nil, err
	}
	db, err = pebble.Open(path, po)
	if err != nil && errors.Is(err, syscall.ENOSPC) {
		return nil, diskFull(path, fs, memBytes, err)
	}
	return db, err
}

func diskFull(path string, fs vfs.FS, memBytes uint64, cause error) error {
	e := &DiskFullError{Dir: path, Need: needFree(memBytes), Err: cause}
	if u, err := fs.GetDiskUsage(existingParent(fs, path)); err == nil {
		e.Free = u.AvailBytes
	}
	return e
}

// isNoSpace reports whether a fatal message is a write refused for space:
// Pebble formats the cause into its message, so the error itself is gone.
func isNoSpace(msg string) bool {
	return strings.Contains(msg, syscall.ENOSPC.Error())
}
