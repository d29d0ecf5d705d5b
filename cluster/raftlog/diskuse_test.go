package raftlog

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// Test_WALFlappingTailStaysNearBudget: a follower under a flapping leader
// has its log's tail cut again and again, and raft-wal starts a new
// preallocated segment at every cut, so the files grow while the entries
// stay few. With segments sized to the budget and the files counted by
// CheckBudget, the snapshot it asks for (here: the compaction Raft does
// after one, down to Trailing entries) keeps the files within the budget
// plus two segments, round after round. Before, 300 cuts held 300
// segments.
func Test_WALFlappingTailStaysNearBudget(t *testing.T) {
	const (
		budget   = 16 << 20
		rounds   = 300
		appended = 4 // entries a round appends
		cut      = 2 // of which the next leader cuts
	)
	seg := SegmentBytesFor(budget)
	if seg != 1<<20 {
		t.Fatalf("segment for a %d-byte budget: %d bytes, want 1 MiB", budget, seg)
	}
	s, err := openCheckedWALSized(filepath.Join(t.TempDir(), WALDir), slog.New(slog.DiscardHandler), seg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	bound := uint64(budget + 2*seg)
	var last, peak uint64
	payload := strings.Repeat("p", 2<<10)
	snapshots := 0
	for round := range rounds {
		logs := make([]*raft.Log, appended)
		for i := range logs {
			logs[i] = cmdLog(last+uint64(i)+1, payload)
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatalf("round %d: store: %v", round, err)
		}
		last += appended
		// The next leader's log differs from here on: the tail goes.
		if err := s.DeleteRange(last-cut+1, last); err != nil {
			t.Fatalf("round %d: cut the tail: %v", round, err)
		}
		last -= cut

		b, err := s.CheckBudget(budget, 10240)
		if err != nil {
			t.Fatal(err)
		}
		peak = max(peak, b.DiskBytes)
		if b.DiskBytes > bound {
			t.Fatalf("round %d: the log's files hold %d bytes, over the budget %d plus two segments (%d)", round, b.DiskBytes, budget, bound)
		}
		if b.Over && last > b.Trailing {
			// What Raft does after the snapshot the watcher takes.
			first, err := s.FirstIndex()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteRange(first, last-b.Trailing); err != nil {
				t.Fatalf("round %d: compact: %v", round, err)
			}
			snapshots++
		}
	}
	u, err := s.DiskUse()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tail cuts, budget %d MiB, segments of %d MiB: peak %.1f MiB on disk (bound %d MiB), %d snapshots, %d segments at the end (%.1f MiB)",
		rounds, budget>>20, seg>>20, float64(peak)/(1<<20), bound>>20, snapshots, len(u.Segments), float64(u.Bytes)/(1<<20))
}

// Test_SegmentBytesFor: a sixteenth of the budget, between 1 and 64 MiB.
func Test_SegmentBytesFor(t *testing.T) {
	for budget, want := range map[uint64]int{0: 64 << 20, 4 << 20: 1 << 20, 512 << 20: 32 << 20, 8 << 30: 64 << 20} {
		if got := SegmentBytesFor(budget); got != want {
			t.Errorf("SegmentBytesFor(%d) = %d, want %d", budget, got, want)
		}
	}
}
