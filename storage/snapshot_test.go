package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
)

type kv struct{ k, v string }

func mustWriteSnapshot(t testing.TB, applied uint64, pairs []kv) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewSnapshotWriter(&buf, applied)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pairs {
		if err := w.Add([]byte(p.k), []byte(p.v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readAll(r io.Reader) (uint64, []kv, error) {
	var got []kv
	applied, err := ReadSnapshot(r, func(k, v []byte) error {
		got = append(got, kv{string(k), string(v)})
		return nil
	})
	return applied, got, err
}

func Test_SnapshotRoundTrip(t *testing.T) {
	big := string(bytes.Repeat([]byte("x"), 3*snapBufferSize+17)) // crosses buffer boundaries
	cases := []struct {
		name    string
		applied uint64
		pairs   []kv
	}{
		{"empty", 0, nil},
		{"small", 42, []kv{{"c/q/t", "meta"}, {"m/applied", "\x00\x00\x00\x00\x00\x00\x00\x2a"}, {"t/1", ""}}},
		{"big value", 1 << 40, []kv{{"a", big}, {"b", "after"}}},
		{"empty value and binary key", 7, []kv{{"\x00\xff", ""}, {"l/\x00\x00", ""}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := mustWriteSnapshot(t, c.applied, c.pairs)
			applied, got, err := readAll(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if applied != c.applied || len(got) != len(c.pairs) {
				t.Fatalf("read applied %d and %d pairs, want %d and %d", applied, len(got), c.applied, len(c.pairs))
			}
			for i := range got {
				if got[i] != c.pairs[i] {
					t.Errorf("pair %d = %q, want %q", i, got[i].k, c.pairs[i].k)
				}
			}
		})
	}
}

// Test_SnapshotDetectsTruncation cuts the stream at every length: none may
// be taken for a complete snapshot.
func Test_SnapshotDetectsTruncation(t *testing.T) {
	b := mustWriteSnapshot(t, 9, []kv{{"k1", "v1"}, {"key2", ""}, {"k3", "value three"}})
	for n := 0; n < len(b); n++ {
		if _, _, err := readAll(bytes.NewReader(b[:n])); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("stream cut at %d of %d bytes: err = %v, want ErrBadSnapshot", n, len(b), err)
		}
	}
}

// Test_SnapshotDetectsCorruption flips every byte in turn.
func Test_SnapshotDetectsCorruption(t *testing.T) {
	b := mustWriteSnapshot(t, 9, []kv{{"k1", "v1"}, {"key2", ""}, {"k3", "value three"}})
	for i := range b {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			c := append([]byte{}, b...)
			c[i] ^= mask
			if _, _, err := readAll(bytes.NewReader(c)); !errors.Is(err, ErrBadSnapshot) {
				t.Errorf("byte %d ^ %#x: err = %v, want ErrBadSnapshot", i, mask, err)
			}
		}
	}
}

func Test_SnapshotRejectsHeaders(t *testing.T) {
	good := mustWriteSnapshot(t, 1, nil)
	badMagic := append([]byte{}, good...)
	copy(badMagic, "NOTDOCKT")
	futureVersion := append([]byte{}, good...)
	futureVersion[len(snapMagic)+3] = SnapVersion + 1
	hugeKey := append([]byte{}, good[:len(snapMagic)+12]...)
	hugeKey = append(hugeKey, 0x7f, 0, 0, 0)
	for name, b := range map[string][]byte{
		"bad magic":      badMagic,
		"future version": futureVersion,
		"huge key":       hugeKey,
		"empty":          nil,
	} {
		if _, _, err := readAll(bytes.NewReader(b)); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: err = %v, want ErrBadSnapshot", name, err)
		}
	}
}

func Test_SnapshotCallbackErrorStops(t *testing.T) {
	b := mustWriteSnapshot(t, 3, []kv{{"a", "1"}, {"b", "2"}})
	boom := errors.New("boom")
	calls := 0
	_, err := ReadSnapshot(bytes.NewReader(b), func(k, v []byte) error {
		calls++
		return boom
	})
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("err = %v after %d calls, want boom after 1", err, calls)
	}
}

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after < len(p) {
		return 0, fmt.Errorf("disk full")
	}
	w.after -= len(p)
	return len(p), nil
}

// Test_SnapshotWriterReportsWriteErrors: the writer buffers, so the error of
// a full disk surfaces at the latest in Close.
func Test_SnapshotWriterReportsWriteErrors(t *testing.T) {
	w, err := NewSnapshotWriter(&failWriter{after: 10}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := w.Add([]byte("key"), bytes.Repeat([]byte("v"), 100)); err != nil {
			return
		}
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close succeeded on a writer that failed")
	}
}
