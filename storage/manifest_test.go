package storage

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// Pebble stops reading a MANIFEST at its first bad record and opens the
// state recorded before it, without an error: the node then started from
// an older applied index (often 0) and replayed the log, and nothing said
// why. Open now says so, and counts it.
func Test_DamagedManifestIsLoggedAndCounted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := OpenDB(dir, DBOptions{NoCompactions: true})
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 20; round++ { // one MANIFEST edit per flush
		if err := db.Set([]byte(fmt.Sprintf("k/%03d", round)), []byte("v"), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	manifests, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if len(manifests) == 0 {
		t.Fatal("no MANIFEST")
	}
	flipByte(t, manifests[len(manifests)-1])

	var logs bytes.Buffer
	before := ManifestRepairs()
	db, err = OpenDB(dir, DBOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("open with a damaged MANIFEST: %v", err)
	}
	if _, closer, err := db.Get([]byte("k/019")); err == nil {
		_ = closer.Close()
		t.Fatal("the last flush survived a flip before its edit")
	} else if !errors.Is(err, pebble.ErrNotFound) {
		t.Fatal(err)
	}
	if got := ManifestRepairs() - before; got != 1 {
		t.Fatalf("ManifestRepairs rose by %d, want 1", got)
	}
	if !strings.Contains(logs.String(), "MANIFEST is damaged") || !strings.Contains(logs.String(), filepath.Base(manifests[len(manifests)-1])) {
		t.Fatalf("no warning naming the MANIFEST in the log:\n%s", logs.String())
	}

	// A sound MANIFEST opens without a word.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	before = ManifestRepairs()
	db, err = OpenDB(dir, DBOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := ManifestRepairs() - before; got != 0 || strings.Contains(logs.String(), "MANIFEST") {
		t.Fatalf("a rewritten MANIFEST counted %d repairs and logged:\n%s", got, logs.String())
	}
}

// Damage in the MANIFEST's first record leaves Pebble nothing to open: the
// open fails as damage (the owner marks it), and no warning claims an
// older state was opened.
func Test_ManifestDamagedInItsFirstRecordRefuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := OpenDB(dir, DBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	manifests, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if len(manifests) == 0 {
		t.Fatal("no MANIFEST")
	}
	b, err := os.ReadFile(manifests[len(manifests)-1])
	if err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 18; i++ { // inside the first record, past its header
		b[i] ^= 0xff
	}
	if err := os.WriteFile(manifests[len(manifests)-1], b, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	before := ManifestRepairs()
	db, err = OpenDB(dir, DBOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err == nil {
		_ = db.Close()
		t.Fatal("opened a keyspace whose MANIFEST's first record is damaged")
	}
	if !IsDamage(err) {
		t.Fatalf("open: %v, want damage", err)
	}
	if got := ManifestRepairs() - before; got != 0 || strings.Contains(logs.String(), "Pebble opened the state") {
		t.Fatalf("counted %d repairs and logged:\n%s", got, logs.String())
	}
}
