package storage

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ScrubStats is what one scrub read.
type ScrubStats struct {
	Tables int   // table files verified
	Bytes  int64 // their size on disk
}

// Scrub re-reads the keyspace's table files (LiveTables) from disk and
// verifies each block's checksum. Pebble checks a block only when it reads
// it from the file, and its block cache keeps serving the copy it read
// before, so bytes that change on disk under a running node go unnoticed
// until a restart or a compaction meets them. between runs after each
// table with the bytes read so far (pacing, cancellation); its error ends
// the scrub. A table that a compaction deleted meanwhile is skipped. A bad
// block is ErrDamaged, naming the file, and leaves the damage marker so
// the next start refuses too.
func (h *Home) Scrub(ctx context.Context, tables []uint64, between func(read int64) error) (ScrubStats, error) {
	var st ScrubStats
	dir := h.path(DBDir)
	ropts := readerOptions()
	for _, num := range tables {
		name := h.opts.FS.PathJoin(dir, fmt.Sprintf("%06d.sst", num))
		n, err := verifyTable(ctx, h.opts.FS, name, ropts)
		if errors.Is(err, os.ErrNotExist) {
			continue // compacted away since the listing
		}
		if err != nil {
			return st, h.damaged(name, err)
		}
		st.Tables++
		st.Bytes += n
		if err := between(st.Bytes); err != nil {
			return st, err
		}
	}
	return st, nil
}

// LiveTables lists the numbers of db's local table files, each once.
func LiveTables(db *pebble.DB) ([]uint64, error) {
	levels, err := db.SSTables()
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	var out []uint64
	seen := map[uint64]bool{}
	for _, level := range levels {
		for _, t := range level {
			if num := uint64(t.BackingSSTNum); t.BackingType == pebble.BackingTypeLocal && !seen[num] {
				seen[num] = true
				out = append(out, num)
			}
		}
	}
	return out, nil
}

// damaged leaves the marker for a table that failed its checksums and
// returns ErrDamaged with the repair.
func (h *Home) damaged(name string, cause error) error {
	msg := fmt.Sprintf("scrub: table %s: %v", name, cause)
	markDamaged(h.opts.Logger, h.opts.FS, h.path(DBDir), msg)
	return fmt.Errorf("%w: %s: %s", ErrDamaged, msg, Repair)
}

// verifyTable reads one table file through its own reader, outside the
// DB's block cache, and checks every block. It returns the file's size.
func verifyTable(ctx context.Context, fs vfs.FS, name string, o sstable.ReaderOptions) (int64, error) {
	f, err := fs.Open(name)
	if err != nil {
		return 0, err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		return 0, errors.Join(err, f.Close())
	}
	r, err := sstable.NewReader(ctx, readable, o)
	if err != nil {
		return 0, errors.Join(err, readable.Close())
	}
	verr := r.ValidateBlockChecksums()
	return readable.Size(), errors.Join(verr, r.Close())
}

// readerOptions are the options OpenDB's tables are read with: the
// comparer, key schemas and filter policy Pebble wrote them under.
func readerOptions() sstable.ReaderOptions {
	po := &pebble.Options{FormatMajorVersion: pebble.FormatNewest}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(bloomBitsPerKey)
	}
	po.EnsureDefaults()
	return po.MakeReaderOptions()
}
