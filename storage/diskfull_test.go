package storage

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// fullFS refuses every write with ENOSPC once full is set, as a disk with
// no space left does, and reports avail bytes free.
type fullFS struct {
	vfs.FS
	full  atomic.Bool
	avail atomic.Uint64
}

func (f *fullFS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return fullFile{File: file, fs: f}, nil
}

func (f *fullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if f.full.Load() {
		return nil, &os.PathError{Op: "create", Path: name, Err: syscall.ENOSPC}
	}
	return f.wrap(f.FS.Create(name, c))
}

func (f *fullFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return f.wrap(f.FS.ReuseForWrite(oldname, newname, c))
}

func (f *fullFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	return vfs.DiskUsage{AvailBytes: f.avail.Load(), TotalBytes: 1 << 30}, nil
}

type fullFile struct {
	vfs.File
	fs *fullFS
}

func (f fullFile) Write(p []byte) (int, error) {
	if f.fs.full.Load() {
		return 0, &os.PathError{Op: "write", Path: "file", Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

func (f fullFile) Sync() error {
	if f.fs.full.Load() {
		return &os.PathError{Op: "sync", Path: "file", Err: syscall.ENOSPC}
	}
	return f.File.Sync()
}

// Test_OpenOnAFullDiskRefuses: a keyspace that held data, reopened on a
// disk with no space left, is refused with one sentence that names the
// directory, the space free and the space needed, instead of a panic
// from Pebble's fatal report; once space is back it opens with its data.
func Test_OpenOnAFullDiskRefuses(t *testing.T) {
	fs := &fullFS{FS: vfs.NewMem()}
	fs.avail.Store(1 << 30)
	const dir = "/keyspace"
	db, err := OpenDB(dir, DBOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("t/1"), []byte("kept"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	fs.full.Store(true)
	fs.avail.Store(3 << 20)
	var got error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("open on a full disk panicked: %v", r)
			}
		}()
		_, got = OpenDB(dir, DBOptions{FS: fs})
	}()
	var full *DiskFullError
	if !errors.Is(got, ErrDiskFull) || !errors.As(got, &full) {
		t.Fatalf("open on a full disk: %v, want ErrDiskFull", got)
	}
	msg := got.Error()
	for _, want := range []string{dir, "3 MiB free", "at least 68 MiB", "nothing it held is lost"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") || strings.Contains(msg, "goroutine") {
		t.Errorf("refusal is not one sentence: %q", msg)
	}

	fs.full.Store(false)
	fs.avail.Store(1 << 30)
	db, err = OpenDB(dir, DBOptions{FS: fs})
	if err != nil {
		t.Fatalf("open once space is back: %v", err)
	}
	defer db.Close()
	v, closer, err := db.Get([]byte("t/1"))
	if err != nil {
		t.Fatalf("the data before the full disk: %v", err)
	}
	defer closer.Close()
	if string(v) != "kept" {
		t.Fatalf("t/1 = %q, want kept", v)
	}
}

// Test_CreateOnAFullDiskRefuses: a fresh data dir on a full disk is
// refused the same way.
func Test_CreateOnAFullDiskRefuses(t *testing.T) {
	fs := &fullFS{FS: vfs.NewMem()}
	fs.full.Store(true)
	var got error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("create on a full disk panicked: %v", r)
			}
		}()
		_, got = OpenDB("/fresh", DBOptions{FS: fs})
	}()
	if !errors.Is(got, ErrDiskFull) {
		t.Fatalf("create on a full disk: %v, want ErrDiskFull", got)
	}
	if !strings.Contains(got.Error(), "unknown free") {
		t.Errorf("refusal %q: want the free space unknown (the FS reports 0)", got)
	}
}
