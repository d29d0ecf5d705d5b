package storage

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

const damageEnv = "DOCKET_DAMAGE_DIR"

// A table block whose bytes changed on disk fails Pebble's checksum in a
// compaction, and Pebble stops the process. Every start then met the same
// block and stopped again a second later, with a stack trace. Now the
// first stop leaves a marker, and the next open refuses at once, naming
// the damage and the repair.
func Test_DamagedTableRefusedAtOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := OpenDB(dir, DBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i++ {
		if err := db.Set([]byte(fmt.Sprintf("t/%06d", i)), []byte(strings.Repeat("v", 100)), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil || len(tables) == 0 {
		t.Fatalf("no tables in %s: %v", dir, err)
	}
	flipByte(t, tables[0]) // inside a data block

	// The child meets the damage in a compaction and dies of it.
	cmd := exec.Command(os.Args[0], "-test.run=^Test_DamageHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), damageEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child read a damaged table and lived:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, DamageMarker)); err != nil {
		t.Fatalf("no damage marker after the fatal report: %v\n%s", err, out)
	}
	_, err = OpenDB(dir, DBOptions{})
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "move its data dir aside") {
		t.Fatalf("open of a damaged keyspace: %v, want ErrDamaged naming the repair", err)
	}
}

// Test_DamageHelper is Test_DamagedTableRefusedAtOpen's child; it does
// nothing in a normal run.
func Test_DamageHelper(t *testing.T) {
	dir := os.Getenv(damageEnv)
	if dir == "" {
		return
	}
	db, err := OpenDB(dir, DBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A full compaction reads every block.
	err = db.Compact(t.Context(), []byte("a"), []byte("z"), true)
	t.Logf("compaction: %v", err)
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
	}
	t.Fatalf("read the damaged keyspace: iterator error %v", it.Error())
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
