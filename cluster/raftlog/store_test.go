package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/dockethq/docket/fsm"
)

func mustCheckedStore(t *testing.T, path string) *Store {
	t.Helper()
	s, err := OpenBolt(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() }) // a second Close is harmless for the test
	return s
}

func cmdLog(index uint64, data string) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: []byte(data),
		Extensions: fsm.CommandExtension([]byte(data), fsm.LevelBase), AppendedAt: time.Now()}
}

// A follower stores nothing of a batch whose command fails its proposer's
// checksum, so Raft never applies it and answers the leader with a failure.
func Test_LogSum_StoreLogsRefusesDamagedCommand(t *testing.T) {
	s := mustCheckedStore(t, filepath.Join(t.TempDir(), "raft.db"))
	good, bad := cmdLog(1, "good"), cmdLog(2, "damaged in flight")
	bad.Data[0] ^= 0x01
	if err := s.StoreLogs([]*raft.Log{good, bad}); !errors.Is(err, fsm.ErrChecksum) {
		t.Fatalf("StoreLogs: %v, want fsm.ErrChecksum", err)
	}
	if last, _ := s.LastIndex(); last != 0 {
		t.Fatalf("last index %d after a refused batch", last)
	}
	if err := s.StoreLogs([]*raft.Log{good}); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(1, &l); err != nil || !sameLog(l, *good) {
		t.Fatalf("GetLog: %v, %+v", err, l)
	}
	if good.Extensions == nil || !bytes.Equal(good.Extensions, fsm.CommandExtension(good.Data, fsm.LevelBase)) {
		t.Fatal("StoreLogs changed the caller's entry, which the LogCache keeps")
	}
}

// A raft.db written before checksums still opens: its entries up to then
// read unchecked, its term and vote are sealed in place, and everything
// written after is checked.
func Test_LogSum_AdoptsRaftDBWithoutChecksums(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	old, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	legacy := &raft.Log{Index: 1, Term: 3, Type: raft.LogCommand, Data: []byte("old"), AppendedAt: time.Now()}
	if err := old.StoreLogs([]*raft.Log{legacy}); err != nil {
		t.Fatal(err)
	}
	if err := old.SetUint64(keyCurrentTerm, 3); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	for round := 0; round < 2; round++ { // adopting, then reopening adopted
		s := mustCheckedStore(t, path)
		if err := s.VerifyLog(0); err != nil {
			t.Fatalf("round %d: verifyLog: %v", round, err)
		}
		var l raft.Log
		if err := s.GetLog(1, &l); err != nil || !sameLog(l, *legacy) {
			t.Fatalf("round %d: legacy entry: %v %+v", round, err, l)
		}
		if term, err := s.GetUint64(keyCurrentTerm); err != nil || term != 3 {
			t.Fatalf("round %d: term %d, %v", round, term, err)
		}
		if round == 0 {
			if err := s.StoreLogs([]*raft.Log{cmdLog(2, "new")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.GetLog(2, &l); err != nil || string(l.Data) != "new" {
			t.Fatalf("round %d: new entry: %v %+v", round, err, l)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// An entry past the adopted range without a checksum is damage.
	raw, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.StoreLogs([]*raft.Log{{Index: 3, Term: 3, Type: raft.LogCommand, Data: []byte("unsealed")}}); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	s := mustCheckedStore(t, path)
	if err := s.VerifyLog(0); !errors.Is(err, ErrRaftStoreCorrupt) {
		t.Fatalf("verifyLog with an unsealed entry 3: %v", err)
	}
}

// A follower that installed a snapshot may keep entries from before it,
// with a gap up to the entries after it; only a gap after the snapshot is
// damage.
func Test_LogSum_VerifyLogAllowsAGapBelowTheSnapshot(t *testing.T) {
	s := mustCheckedStore(t, filepath.Join(t.TempDir(), "raft.db"))
	if err := s.SetUint64(keyCurrentTerm, 1); err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint64{1, 2, 3, 10, 11, 12} {
		if err := s.StoreLogs([]*raft.Log{cmdLog(i, "x")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		snap uint64
		ok   bool
	}{{9, true}, {3, false}, {10, true}, {0, false}} {
		if err := s.VerifyLog(c.snap); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrRaftStoreCorrupt)) {
			t.Errorf("snapshot at %d: %v", c.snap, err)
		}
	}
}

func sameLog(a, b raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Extensions, b.Extensions) &&
		a.AppendedAt.Equal(b.AppendedAt)
}

// Below its first index a store answers raft.ErrLogNotFound, as raft.db
// does: Raft then sends a lagging follower a snapshot. raft-wal went on
// answering deleted entries until their segment file was removed, so a
// follower caught up from entries the log no longer claims to hold, and
// the snapshot path went untested on the default store.
func Test_LogSum_NothingBelowFirstIndex(t *testing.T) {
	stores := map[string]func(t *testing.T) *Store{
		"bolt": func(t *testing.T) *Store { return mustCheckedStore(t, filepath.Join(t.TempDir(), "raft.db")) },
		"wal": func(t *testing.T) *Store {
			s, err := openCheckedWAL(filepath.Join(t.TempDir(), "raft-wal"), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			var logs []*raft.Log
			for i := uint64(1); i <= 20; i++ {
				logs = append(logs, cmdLog(i, "entry"))
			}
			if err := s.StoreLogs(logs); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteRange(1, 10); err != nil {
				t.Fatal(err)
			}
			if first, err := s.FirstIndex(); err != nil || first != 11 {
				t.Fatalf("first index %d, %v; want 11", first, err)
			}
			var l raft.Log
			for _, idx := range []uint64{1, 5, 10} {
				if err := s.GetLog(idx, &l); !errors.Is(err, raft.ErrLogNotFound) {
					t.Fatalf("GetLog(%d) below the first index: %v (entry %d), want raft.ErrLogNotFound", idx, err, l.Index)
				}
			}
			if err := s.GetLog(11, &l); err != nil || l.Index != 11 {
				t.Fatalf("GetLog(11): %v, entry %d", err, l.Index)
			}
		})
	}
}

// A raft-wal segment with bytes flipped where entries were written (what
// the harness's corrupt-disk fault does to the default store) either fails
// to open, or reads every entry back as written or as ErrRaftStoreCorrupt,
// or has lost its tail, which VerifyApplied refuses: raft-wal keeps the
// entries before a damaged frame of the active segment and drops the rest
// without an error. Never a changed entry, never a panic, and never a
// shorter log taken for a sound one.
func Test_LogSum_WALSegmentFlipsAreDetectedOrHarmless(t *testing.T) {
	const n = 300
	want := make([]*raft.Log, n)
	for i := range want {
		want[i] = cmdLog(uint64(i+1), fmt.Sprintf("entry %d %s", i+1, strings.Repeat("x", i%50)))
	}
	outcomes := map[string]int{}
	rounds := FlipRounds(12)
	for seed := uint64(1); seed <= uint64(rounds); seed++ {
		dir := filepath.Join(t.TempDir(), "raft-wal")
		s, err := openCheckedWAL(dir, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i += 10 { // one append per batch, as Raft does
			if err := s.StoreLogs(want[i : i+10]); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
		if len(segs) != 1 {
			t.Fatalf("segments %v, want 1", segs)
		}
		b, err := os.ReadFile(segs[0])
		if err != nil {
			t.Fatal(err)
		}
		end := len(b)
		for end > 0 && b[end-1] == 0 {
			end--
		}
		r := rand.New(rand.NewPCG(seed, 7))
		for range 4 {
			off := r.IntN(end - 8)
			for j := off; j < off+8; j++ {
				b[j] ^= 0xff
			}
		}
		if err := os.WriteFile(segs[0], b, 0o644); err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("seed %d: panic reading a damaged segment: %v", seed, p)
				}
			}()
			s, err := openCheckedWAL(dir, slog.New(slog.DiscardHandler))
			if err != nil {
				outcomes["refused at open"]++
				return
			}
			defer s.Close()
			if err := s.VerifyLog(0); err != nil {
				if !errors.Is(err, ErrRaftStoreCorrupt) {
					t.Fatalf("seed %d: VerifyLog: %v, want ErrRaftStoreCorrupt", seed, err)
				}
				outcomes["refused by VerifyLog"]++
				return
			}
			last, _ := s.LastIndex()
			if last < n {
				// The node had applied every entry (as a leader that
				// committed them would have).
				if err := s.VerifyApplied(n); !errors.Is(err, ErrRaftStoreCorrupt) {
					t.Fatalf("seed %d: the log lost entries %d-%d and VerifyApplied(%d) answered %v", seed, last+1, n, n, err)
				}
				outcomes["lost its tail; refused by VerifyApplied"]++
				return
			}
			for _, w := range want {
				var l raft.Log
				if err := s.GetLog(w.Index, &l); err == nil && !sameLog(l, *w) {
					t.Fatalf("seed %d: entry %d read back changed and unflagged", seed, w.Index)
				} else if err != nil {
					t.Fatalf("seed %d: entry %d: %v after VerifyLog passed", seed, w.Index, err)
				}
			}
			outcomes["harmless"]++
		}()
	}
	t.Logf("%d damaged segments: %v", rounds, outcomes)
}

// A zeroed stretch of the active segment (a lost write, or a flip in a
// frame header, which raft-wal takes for the end) opens without an error,
// with every entry after it gone, and VerifyLog finds nothing wrong with
// the shorter log. A node that had applied those entries must not start
// on it: VerifyApplied refuses.
func Test_LogSum_WALLostTailRefusedByVerifyApplied(t *testing.T) {
	const n = 300
	dir := filepath.Join(t.TempDir(), "raft-wal")
	s, err := openCheckedWAL(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= n; i += 10 {
		var batch []*raft.Log
		for j := i; j < i+10; j++ {
			batch = append(batch, cmdLog(j, fmt.Sprintf("entry %d", j)))
		}
		if err := s.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetUint64(keyCurrentTerm, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	clear(b[end/2 : end])
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}

	s, err = openCheckedWAL(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("raft-wal refused the shorter segment (%v): this test needs its silent truncation", err)
	}
	defer s.Close()
	if err := s.VerifyLog(0); err != nil {
		t.Fatalf("VerifyLog: %v", err)
	}
	last, _ := s.LastIndex()
	if last >= n || last == 0 {
		t.Fatalf("last index %d after zeroing the segment's second half, want a shorter log", last)
	}
	if err := s.VerifyApplied(last); err != nil {
		t.Fatalf("VerifyApplied(%d) of a node that applied no further: %v", last, err)
	}
	err = s.VerifyApplied(n)
	if !errors.Is(err, ErrRaftStoreCorrupt) || !strings.Contains(err.Error(), "lost entries") {
		t.Fatalf("the log ends at %d, the node applied %d: VerifyApplied answered %v, want ErrRaftStoreCorrupt", last, n, err)
	}
}
