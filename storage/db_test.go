package storage

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Test_PebbleFatalPanics: Pebble's Fatalf logs and panics with a
// *FatalError instead of exiting the process, so the node's owner decides
// (and a test can see it at all).
func Test_PebbleFatalPanics(t *testing.T) {
	var logged bytes.Buffer
	l := pebbleLogger{log: slog.New(slog.NewTextHandler(&logged, nil)), fs: vfs.NewMem(), dir: "db"}
	defer func() {
		fe, ok := recover().(*FatalError)
		if !ok {
			t.Fatalf("Fatalf did not panic with a *FatalError")
		}
		if fe.Msg != "manifest 7 is gone" {
			t.Errorf("FatalError.Msg = %q", fe.Msg)
		}
		if s := logged.String(); !strings.Contains(s, "manifest 7 is gone") || !strings.Contains(s, "fatal=true") {
			t.Errorf("Fatalf logged %q, want the message marked fatal", s)
		}
	}()
	l.Fatalf("manifest %d is gone", 7)
	t.Fatal("Fatalf returned")
}

// mustLive opens the live database of h.
func mustLive(t *testing.T, h *Home) *pebble.DB {
	t.Helper()
	db, err := h.OpenLive()
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// Test_HomeRestore: a restore is built beside the live keyspace, leaves it
// untouched when the stream is bad, and replaces it whole when installed;
// the directory then holds only the live database.
func Test_HomeRestore(t *testing.T) {
	fs := vfs.NewMem()
	const dir = "/data/node/fsm"
	h, err := OpenHome(dir, DBOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	db := mustLive(t, h)
	mustCommit(t, db, func(b *pebble.Batch) error {
		return errors.Join(SetUint64(b, KeyApplied, 5), b.Set([]byte("t/old"), nil, nil))
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	good := mustWriteSnapshot(t, 9, []kv{{string(KeyApplied), string(PutUint64(nil, 9))}, {"t/new", "x"}})
	for name, stream := range map[string][]byte{
		"truncated":        good[:len(good)-3],
		"header disagrees": mustWriteSnapshot(t, 8, []kv{{string(KeyApplied), string(PutUint64(nil, 9))}}),
	} {
		if _, err := h.BuildRestore(bytes.NewReader(stream)); err == nil {
			t.Fatalf("%s stream: BuildRestore succeeded", name)
		}
		if names, _ := fs.List(dir); !slices.Equal(names, []string{DBDir}) {
			t.Fatalf("%s stream: %s holds %v after a failed restore", name, dir, names)
		}
	}

	applied, err := h.BuildRestore(bytes.NewReader(good))
	if err != nil || applied != 9 {
		t.Fatalf("BuildRestore = %d, %v; want 9", applied, err)
	}
	if err := h.InstallRestore(); err != nil {
		t.Fatal(err)
	}
	if names, _ := fs.List(dir); !slices.Equal(names, []string{DBDir}) {
		t.Errorf("%s holds %v after the swap, want only %s", dir, names, DBDir)
	}
	db = mustLive(t, h)
	defer db.Close()
	r := Wrap(db)
	if got, err := GetUint64(r, KeyApplied); err != nil || got != 9 {
		t.Errorf("applied after restore = %d, %v; want 9", got, err)
	}
	if _, err := getCopy(r, []byte("t/old")); !errors.Is(err, ErrNotFound) {
		t.Errorf("the old keyspace's key survived the restore: %v", err)
	}
	if v, err := getCopy(r, []byte("t/new")); err != nil || string(v) != "x" {
		t.Errorf("t/new = %q, %v; want x", v, err)
	}
	if _, err := fs.Stat(fs.PathJoin(dir, DBDir, RestoreMarker)); err == nil {
		t.Error("restore marker left in the live database")
	}
}

// Test_WALOfAnOlderBuildIsReplayed: a keyspace written with Pebble's WAL
// on (an older build) and not flushed opens with every write, and keeps
// them across a crash after the open, although OpenDB's WAL is off.
func Test_WALOfAnOlderBuildIsReplayed(t *testing.T) {
	fs := vfs.NewCrashableMem()
	const dir = "/data/fsm/db"
	old, err := pebble.Open(dir, &pebble.Options{FS: fs, FormatMajorVersion: pebble.FormatNewest, Logger: pebbleLogger{log: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Set(KeyApplied, PutUint64(nil, 7), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"open", "open after a crash"} {
		db, err := OpenDB(dir, DBOptions{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := GetUint64(Wrap(db), KeyApplied); err != nil || got != 7 {
			t.Fatalf("%s: applied %d, %v; want 7", step, got, err)
		}
		fs = fs.CrashClone(vfs.CrashCloneCfg{}) // no flush, no Close
		_ = db.Close()                          // the original; the clone lives on
	}
}
