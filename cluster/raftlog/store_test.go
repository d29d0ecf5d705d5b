package raftlog

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
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
