package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// Bytes that change on disk under an open keyspace are found by a scrub,
// which reads the table files themselves: a Get still answers from the
// block cache's good copy.
func Test_ScrubFindsBytesFlippedWhileOpen(t *testing.T) {
	h, err := OpenHome(t.TempDir(), DBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := h.OpenLive()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for i := 0; i < 2000; i++ {
		if err := db.Set([]byte(fmt.Sprintf("t/%06d", i)), []byte(strings.Repeat("v", 100)), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var paced []int64
	live, err := ListLive(db)
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.Scrub(ctx, live, func(read int64) error { paced = append(paced, read); return nil })
	if err != nil || st.Tables == 0 || len(paced) != st.Tables {
		t.Fatalf("scrub of a sound keyspace: %+v, %v (paced %v)", st, err, paced)
	}
	// Read every key once so the blocks sit in the cache, then flip one.
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(h.Dir(), DBDir, "*.sst"))
	if len(files) == 0 {
		t.Fatal("no tables")
	}
	flipByte(t, files[0])
	if _, closer, err := db.Get([]byte("t/000001")); err != nil {
		t.Fatalf("the cached copy no longer answers: %v", err)
	} else {
		_ = closer.Close()
	}
	_, err = h.Scrub(ctx, live, func(int64) error { return nil })
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), filepath.Base(files[0])) {
		t.Fatalf("scrub after a flip: %v, want ErrDamaged naming %s", err, files[0])
	}
	if _, err := os.Stat(filepath.Join(h.Dir(), DBDir, DamageMarker)); err != nil {
		t.Fatalf("no damage marker: %v", err)
	}
}
