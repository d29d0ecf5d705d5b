//go:build unix

package health

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The ballast is a real file of the asked size (not sparse, or deleting
// it would free nothing), written once, and never written when the disk
// lacks room for it twice over.
func Test_BallastWrittenOnceAndOnlyWithRoom(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	const size = 3<<20 + 5
	EnsureBallast(dir, size, log)
	path := filepath.Join(dir, BallastFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("ballast: %v", err)
	}
	if fi.Size() != size {
		t.Fatalf("ballast size %d, want %d", fi.Size(), size)
	}
	if used := fi.Sys().(*syscall.Stat_t).Blocks * 512; used < size {
		t.Fatalf("ballast uses %d bytes on disk, want >= %d: it is sparse", used, size)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}

	// Present: kept as it is, even when the asked size changed.
	old := time.Unix(1_000_000, 0)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	EnsureBallast(dir, 1<<20, log)
	if fi, err := os.Stat(path); err != nil || !fi.ModTime().Equal(old) || fi.Size() != size {
		t.Fatalf("existing ballast rewritten: %v %v", fi.ModTime(), err)
	}

	// No room: nothing written, no error.
	dir2 := t.TempDir()
	EnsureBallast(dir2, math.MaxInt64/4, log)
	if _, err := os.Stat(filepath.Join(dir2, BallastFile)); !os.IsNotExist(err) {
		t.Fatalf("ballast written without room: %v", err)
	}
	ents, _ := os.ReadDir(dir2)
	if len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}
