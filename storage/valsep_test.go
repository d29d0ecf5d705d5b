package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// bigValue is a value that separation moves out of the tables. It is
// random, so that compression does not shrink it.
func bigValue(i int) []byte {
	v := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	for j := range v {
		v[j] = byte(rng.Uint32())
	}
	return v
}

// mustWriteValues writes n large values and as many small ones, and
// flushes them.
func mustWriteValues(t *testing.T, db *pebble.DB, n int) {
	t.Helper()
	for i := range n {
		if err := db.Set([]byte(fmt.Sprintf("v/%06d", i)), bigValue(i), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if err := db.Set([]byte(fmt.Sprintf("t/%06d", i)), []byte("header"), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
}

// mustReadValues checks that every value mustWriteValues wrote reads back.
func mustReadValues(t *testing.T, db *pebble.DB, n int) {
	t.Helper()
	for i := range n {
		for _, kv := range []struct {
			key  string
			want []byte
		}{{fmt.Sprintf("v/%06d", i), bigValue(i)}, {fmt.Sprintf("t/%06d", i), []byte("header")}} {
			got, closer, err := db.Get([]byte(kv.key))
			if err != nil {
				t.Fatalf("get %s: %v", kv.key, err)
			}
			if !bytes.Equal(got, kv.want) {
				t.Fatalf("get %s: %d bytes, not the %d written", kv.key, len(got), len(kv.want))
			}
			_ = closer.Close()
		}
	}
}

// A large value is written once, into a blob file, and a compaction of
// its table moves the handle, not the value.
func Test_LargeValuesLiveInBlobFiles(t *testing.T) {
	db, err := OpenDB(t.TempDir(), DBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	const n = 64 // 4 MiB of large values
	mustWriteValues(t, db, n)
	m := db.Metrics()
	if m.BlobFiles.LiveCount == 0 || m.BlobFiles.ValueSize < n*64<<10 {
		t.Fatalf("blob files: %d holding %d value bytes; want the %d bytes of large values", m.BlobFiles.LiveCount, m.BlobFiles.ValueSize, n*64<<10)
	}
	before := m.Levels
	if err := db.Compact(context.Background(), []byte("a"), []byte("z"), true); err != nil {
		t.Fatal(err)
	}
	after := db.Metrics()
	var compacted uint64
	for i := range after.Levels {
		compacted += after.Levels[i].TableBytesCompacted + after.Levels[i].BlobBytesCompacted -
			before[i].TableBytesCompacted - before[i].BlobBytesCompacted
	}
	if compacted > n*64<<10/8 {
		t.Errorf("a compaction wrote %d bytes: the large values were rewritten", compacted)
	}
	mustReadValues(t, db, n)
}

// A keyspace that separated its values opens in a build that keeps them
// inline (InlineValues, as every build before separation) and reads the
// same, before and after a compaction.
func Test_SeparatedValuesReadInline(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenDB(dir, DBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 32
	mustWriteValues(t, db, n)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = OpenDB(dir, DBOptions{InlineValues: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	mustReadValues(t, db, n)
	if err := db.Compact(context.Background(), []byte("a"), []byte("z"), true); err != nil {
		t.Fatal(err)
	}
	mustReadValues(t, db, n)
}

// A keyspace of an older Pebble format (one before blob files) is
// ratcheted to pebbleFormat when OpenDB opens it, keeps its values, and
// separates the values it writes from then on.
func Test_OlderFormatIsRatchetedAtOpen(t *testing.T) {
	dir := t.TempDir()
	old, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatColumnarBlocks,
		Logger: pebbleLogger{log: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	mustWriteValues(t, old, n)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := OpenDB(dir, DBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if got := db.FormatMajorVersion(); got != pebbleFormat {
		t.Fatalf("format %s after open, want %s", got, pebbleFormat)
	}
	mustReadValues(t, db, n)
	if live := db.Metrics().BlobFiles.LiveCount; live != 0 {
		t.Fatalf("%d blob files before any write", live)
	}
	if err := db.Set([]byte("v/new"), bigValue(1), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if live := db.Metrics().BlobFiles.LiveCount; live == 0 {
		t.Error("a value written after the ratchet was not separated")
	}
}

// A scrub reads the blob files too: a byte flipped in one is damage.
func Test_ScrubFindsBytesFlippedInABlobFile(t *testing.T) {
	h, err := OpenHome(t.TempDir(), DBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := h.OpenLive()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	mustWriteValues(t, db, 32)
	live, err := ListLive(db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := h.Scrub(ctx, live, func(int64) error { return nil })
	if err != nil || st.Blobs == 0 || st.Bytes < 32*64<<10 {
		t.Fatalf("scrub of a sound keyspace: %+v, %v; want its blob files read", st, err)
	}
	files, _ := filepath.Glob(filepath.Join(h.Dir(), DBDir, "*.blob"))
	if len(files) == 0 {
		t.Fatal("no blob files")
	}
	flipByte(t, files[0])
	_, err = h.Scrub(ctx, live, func(int64) error { return nil })
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), filepath.Base(files[0])) {
		t.Fatalf("scrub after a flip: %v, want ErrDamaged naming %s", err, files[0])
	}
}
