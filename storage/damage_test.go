package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// A table block whose bytes changed on disk fails Pebble's checksum in a
// compaction. Pebble's default then panicked inside the compaction, which
// died again of a second panic ("Release called on a BufferPool with
// in-use buffers") before a caller could refuse, and the marker held
// Pebble's stack. Now the first meeting leaves a one-line marker and
// reports the damage to the owner, and the next open refuses at once,
// naming the file and the repair.
func Test_DamagedTableRefusedAtOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := OpenDB(dir, DBOptions{NoCompactions: true})
	if err != nil {
		t.Fatal(err)
	}
	// Two overlapping tables, so that a compaction must read them rather
	// than move one down a level.
	for round := 0; round < 2; round++ {
		for i := 0; i < 2000; i++ {
			if err := db.Set([]byte(fmt.Sprintf("t/%06d", i)), []byte(strings.Repeat("v", 100+round)), pebble.NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil || len(tables) < 2 {
		t.Fatalf("no tables in %s: %v", dir, err)
	}
	flipByte(t, tables[0]) // inside a data block

	reported := make(chan error, 4)
	db, err = OpenDB(dir, DBOptions{OnDamage: func(err error) { reported <- err }})
	if err != nil {
		t.Fatal(err)
	}
	// A full compaction reads every block, as the first one after a start
	// does. Pebble then keeps its compactions off the damaged span, so a
	// manual one waits for ever: it ends with the test's deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	compacted := make(chan error, 1)
	go func() { compacted <- db.Compact(ctx, []byte("a"), []byte("z"), true) }()
	var got error
	select {
	case got = <-reported:
	case err := <-compacted:
		t.Fatalf("the compaction ended (%v) and no damage was reported", err)
	}
	cancel()
	<-compacted
	if err := db.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if !errors.Is(got, ErrDamaged) || !strings.Contains(got.Error(), filepath.Base(tables[0])) {
		t.Fatalf("damage reported as %v, want ErrDamaged naming %s", got, tables[0])
	}
	if len(reported) != 0 {
		t.Fatalf("damage reported again: %v", <-reported)
	}
	marker, err := os.ReadFile(filepath.Join(dir, DamageMarker))
	if err != nil {
		t.Fatalf("no damage marker after the compaction met the damage: %v", err)
	}
	if n := strings.Count(string(marker), "\n"); n != 1 {
		t.Fatalf("the marker holds %d lines, want 1:\n%s", n, marker)
	}
	_, err = OpenDB(dir, DBOptions{})
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "move its data dir aside") ||
		!strings.Contains(err.Error(), filepath.Base(tables[0])) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("open of a damaged keyspace: %q, want one line of ErrDamaged naming the file and the repair", err)
	}
}

// flipByte inverts the byte a third into path: inside a data block of a
// table or a value of a blob file, past any header.
func flipByte(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
