package raftlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// Test_Scrub_FindsAnEntryDamagedWhileRunning: bytes of a stored entry that
// change on disk under a running node are found by the scrub, which reads
// every entry through its checksum, on either store; the store reports
// the fault (OnFault) and the scrub names the entry. Before the scrub,
// nothing read the entry until Raft replicated it or the node restarted.
func Test_Scrub_FindsAnEntryDamagedWhileRunning(t *testing.T) {
	for _, kind := range []string{"wal", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			var s *Store
			var err error
			if kind == "wal" {
				s, err = openCheckedWAL(filepath.Join(dir, "raft-wal"), slog.New(slog.DiscardHandler))
			} else {
				s, err = OpenBolt(filepath.Join(dir, "raft.db"), slog.New(slog.DiscardHandler))
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var faults []error
			s.OnFault = func(err error) { faults = append(faults, err) }
			const n = 300
			for i := 0; i < n; i += 10 {
				batch := make([]*raft.Log, 0, 10)
				for j := i; j < i+10; j++ {
					batch = append(batch, cmdLog(uint64(j+1), fmt.Sprintf("entry-%04d %s", j+1, strings.Repeat("x", 40))))
				}
				if err := s.StoreLogs(batch); err != nil {
					t.Fatal(err)
				}
			}
			none := func(int64) error { return nil }
			entries, _, err := s.ScrubLog(context.Background(), none)
			if err != nil || entries != n {
				t.Fatalf("scrub of a sound log: %d entries, %v; want %d, nil", entries, err, n)
			}
			flipOnDisk(t, dir, []byte("entry-0150 "))
			_, _, err = s.ScrubLog(context.Background(), none)
			if !errors.Is(err, ErrRaftStoreCorrupt) || !strings.Contains(err.Error(), "entry 150") {
				t.Fatalf("scrub after entry 150 was damaged on disk: %v, want ErrRaftStoreCorrupt naming entry 150", err)
			}
			if len(faults) != 1 {
				t.Fatalf("the store reported %d faults, want 1", len(faults))
			}
		})
	}
}

// flipOnDisk flips a byte inside the first occurrence of needle in a file
// under dir, in place, as a disk would under a running process.
func flipOnDisk(t *testing.T, dir string, needle []byte) {
	t.Helper()
	var done bool
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || done {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		at := bytes.Index(b, needle)
		if at < 0 {
			return nil
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte{b[at+len(needle)-2] ^ 0x01}, int64(at+len(needle)-2)); err != nil {
			return err
		}
		done = true
		return f.Sync()
	})
	if err != nil || !done {
		t.Fatalf("flip %q under %s: found %v, %v", needle, dir, done, err)
	}
}
