package fsm

import (
	"math/rand/v2"
	"testing"
)

// mustOpenHarness opens a harness with opts.
func mustOpenHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), opts: opts}
	h.f = mustOpen(t, h.dir, opts)
	return h
}

func blobFiles(t *testing.T, f *FSM) uint64 {
	t.Helper()
	if err := f.db.Flush(); err != nil {
		t.Fatal(err)
	}
	return f.db.Metrics().BlobFiles.LiveCount
}

// Where Pebble keeps large values (blob files, or inline in the tables as
// builds before value separation did) is not part of the keyspace: a
// replica of each kind fed the same log hashes the same, and a snapshot of
// either restores into the other to the same hash, with the restored
// replica keeping its own kind of layout.
func Test_SeparatedValuesHashAndRestoreAsInline(t *testing.T) {
	const seed, n = 23, 1500
	sep := mustOpenHarness(t, Options{})
	logs, _ := generate(t, sep.f, seed, n, nil)
	inl := mustOpenHarness(t, Options{InlineValues: true})
	applyInBatches(inl.f, logs, rand.New(rand.NewPCG(seed, 1)), 64)
	if b := blobFiles(t, sep.f); b == 0 {
		t.Fatal("the separating replica wrote no blob file: the workload's large payloads stayed inline")
	}
	if b := blobFiles(t, inl.f); b != 0 {
		t.Fatalf("the inline replica wrote %d blob files", b)
	}
	want := mustHash(t, sep.f)
	if h := mustHash(t, inl.f); h != want {
		t.Fatalf("inline replica hash %s, separating %s", h, want)
	}
	for _, c := range []struct {
		name     string
		from     *FSM
		into     Options
		wantBlob bool
	}{
		{"separated into inline", sep.f, Options{InlineValues: true}, false},
		{"inline into separated", inl.f, Options{}, true},
	} {
		r := mustOpenHarness(t, c.into)
		if err := restoreFrom(r.f, mustSnapshot(t, c.from)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if h := mustHash(t, r.f); h != want || r.f.AppliedIndex() != sep.f.AppliedIndex() {
			t.Fatalf("%s: hash %s at %d, want %s at %d", c.name, h, r.f.AppliedIndex(), want, sep.f.AppliedIndex())
		}
		if b := blobFiles(t, r.f); (b > 0) != c.wantBlob {
			t.Fatalf("%s: %d blob files after the restore", c.name, b)
		}
		r.reopen()
		if h := mustHash(t, r.f); h != want {
			t.Fatalf("%s: hash %s after reopen, want %s", c.name, h, want)
		}
	}
}
