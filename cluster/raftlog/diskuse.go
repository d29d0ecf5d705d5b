package raftlog

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	wal "github.com/hashicorp/raft-wal"
)

// raft-wal preallocates each segment file whole (fallocate), and starts a
// new one at every tail cut: a leader that flapped filled a 512 MiB disk
// with 64 MiB segments holding a few entries each, while the entries the
// byte budget counts (Sizes) stayed small. So the budget also counts the
// files, and raft-wal's segments are sized to the budget.

const (
	// segmentsPerBudget is how many raft-wal segments fit in the log byte
	// budget: small enough that one segment, preallocated and empty, is a
	// small part of the budget; large enough that a segment holds many
	// entries and rotation stays rare.
	segmentsPerBudget = 16
	// minSegmentBytes is the smallest segment size: below it rotation
	// (a seal, a new file and its fsyncs) comes every few entries.
	minSegmentBytes = 1 << 20
)

// SegmentBytesFor is the raft-wal segment size for a log byte budget:
// budget/16, between 1 MiB and raft-wal's default of 64 MiB. No budget (0)
// keeps the default. An entry larger than a segment still fits: raft-wal
// seals the segment after it.
func SegmentBytesFor(budget uint64) int {
	if budget == 0 {
		return wal.DefaultSegmentSize
	}
	return int(min(max(budget/segmentsPerBudget, minSegmentBytes), uint64(wal.DefaultSegmentSize)))
}

// DiskUse is what the log's files take on disk, read from its directory.
type DiskUse struct {
	// Bytes is the space the files hold: allocated blocks where the
	// system tells them (a preallocated segment counts whole), else their
	// size.
	Bytes uint64
	// Segments are raft-wal's segment files, oldest first; none for bolt.
	Segments []Segment
}

// Segment is one raft-wal segment file: the index of its first entry and
// the bytes it holds on disk.
type Segment struct {
	Base  uint64
	Bytes uint64
}

// DiskUse reads what the log's files take on disk: raft-wal's directory
// (its segments and its meta file), or raft.db.
func (s *Store) DiskUse() (DiskUse, error) {
	if s.kind() != "raft-wal" {
		fi, err := os.Stat(s.path)
		if err != nil {
			return DiskUse{}, fmt.Errorf("log disk use: %w", err)
		}
		return DiskUse{Bytes: onDisk(fi)}, nil
	}
	entries, err := os.ReadDir(s.path)
	if err != nil {
		return DiskUse{}, fmt.Errorf("log disk use: %w", err)
	}
	var u DiskUse
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed since the listing: a compacted segment
		}
		n := onDisk(fi)
		u.Bytes += n
		if base, ok := segmentBase(e.Name()); ok {
			u.Segments = append(u.Segments, Segment{Base: base, Bytes: n})
		}
	}
	sort.Slice(u.Segments, func(i, j int) bool { return u.Segments[i].Base < u.Segments[j].Base })
	return u, nil
}

// segmentBase reads the first index from a raft-wal segment's file name,
// <base, 20 digits>-<id, 16 hex digits>.wal.
func segmentBase(name string) (uint64, bool) {
	head, ok := strings.CutSuffix(name, ".wal")
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(filepath.Base(head), "-")
	if !ok {
		return 0, false
	}
	base, err := strconv.ParseUint(digits, 10, 64)
	return base, err == nil
}

// NewestWithin is how many of the newest entries up to last lie in the
// newest segments whose files fit in budget bytes (the newest segment
// always counts): the trailing entries to keep so that compaction frees
// the older files. It is at least 1, and 0 without segments (bolt: the
// files do not decide).
func (u DiskUse) NewestWithin(budget, last uint64) uint64 {
	if len(u.Segments) == 0 {
		return 0
	}
	from := u.Segments[len(u.Segments)-1].Base
	var sum uint64
	for i := len(u.Segments) - 1; i >= 0; i-- {
		sum += u.Segments[i].Bytes
		if sum > budget && i != len(u.Segments)-1 {
			break
		}
		from = u.Segments[i].Base
	}
	if from > last {
		return 1
	}
	return last - from + 1
}

// Budget is the log byte budget's verdict at one moment (CheckBudget).
type Budget struct {
	// Trailing is how many entries a snapshot should leave in the log.
	Trailing uint64
	// Over says the log's entries or its files are over the budget: a
	// snapshot is due, which compacts the log down to Trailing entries.
	Over bool
	// EntryBytes and DiskBytes are what was compared with the budget.
	EntryBytes, DiskBytes uint64
}

// CheckBudget compares the log with budget bytes: its entries, and
// raft-wal's files. Trailing keeps the
// newest entries that fit in a quarter of the budget (never below
// MinTrailingLogs, never above trailingMax), and fewer when the segment
// files holding them take more than that: after a run of tail cuts, the
// newest entries may lie in many preallocated, nearly empty segments, and
// only compacting past them frees their files.
func (s *Store) CheckBudget(budget, trailingMax uint64) (Budget, error) {
	disk, err := s.DiskUse()
	if err != nil {
		return Budget{}, err
	}
	last, err := s.LastIndex()
	if err != nil {
		return Budget{}, fmt.Errorf("log budget: %w", err)
	}
	b := Budget{EntryBytes: s.sizes.Bytes(), DiskBytes: disk.Bytes}
	b.Trailing = min(trailingMax, max(MinTrailingLogs, s.sizes.NewestWithin(budget/4)))
	if n := disk.NewestWithin(budget/4, last); n > 0 {
		b.Trailing = min(b.Trailing, n)
	}
	// Only raft-wal's files are counted against the budget: raft.db never
	// shrinks (bbolt reuses its free pages), so a file that once grew past
	// the budget would ask for a snapshot every second, freeing nothing.
	b.Over = b.EntryBytes > budget || len(disk.Segments) > 0 && b.DiskBytes > budget
	return b, nil
}
