package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/blob"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/sstable/colblk"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ScrubStats is what one scrub read.
type ScrubStats struct {
	Tables int   // table files verified
	Blobs  int   // blob files (separated values, valsep.go) verified
	Bytes  int64 // their size on disk
}

// LiveFiles are the files of a keyspace that a scrub reads, by number.
type LiveFiles struct {
	Tables []uint64 // local table files (%06d.sst)
	// Blobs are the blob files the tables reference (%06d.blob): a blob
	// file's id is the number of the file it was first written as.
	Blobs []uint64
}

// Scrub re-reads the keyspace's table files and then its blob files
// (ListLive) from disk and verifies each block's checksum. Pebble checks a
// block only when it reads it from the file, and its block cache keeps
// serving the copy it read before, so bytes that change on disk under a
// running node go unnoticed until a restart or a compaction meets them.
// between runs after each file with the bytes read so far (pacing,
// cancellation); its error ends the scrub. A file that a compaction
// deleted meanwhile is skipped. A bad block is ErrDamaged, naming the
// file, and leaves the damage marker so the next start refuses too.
//
// Files come from Pebble's current version, never from listing the
// directory, which also holds files a flush is still writing. A blob file
// that Pebble rewrote to reclaim garbage keeps its id under a new file
// number, which Pebble does not show; a scrub skips it, and Pebble still
// checks each block it reads from it.
func (h *Home) Scrub(ctx context.Context, live LiveFiles, between func(read int64) error) (ScrubStats, error) {
	var st ScrubStats
	dir := h.path(DBDir)
	ropts := readerOptions()
	type file struct {
		name string
		blob bool
	}
	files := make([]file, 0, len(live.Tables)+len(live.Blobs))
	for _, num := range live.Tables {
		files = append(files, file{h.opts.FS.PathJoin(dir, fmt.Sprintf("%06d.sst", num)), false})
	}
	for _, num := range live.Blobs {
		files = append(files, file{h.opts.FS.PathJoin(dir, fmt.Sprintf("%06d.blob", num)), true})
	}
	for _, f := range files {
		var n int64
		var err error
		if f.blob {
			n, err = verifyBlob(ctx, h.opts.FS, f.name)
		} else {
			n, err = verifyTable(ctx, h.opts.FS, f.name, ropts)
		}
		if errors.Is(err, os.ErrNotExist) {
			continue // compacted away or rewritten since the listing
		}
		if err != nil {
			return st, h.damaged(f.name, err)
		}
		if f.blob {
			st.Blobs++
		} else {
			st.Tables++
		}
		st.Bytes += n
		if err := between(st.Bytes); err != nil {
			return st, err
		}
	}
	return st, nil
}

// ListLive lists db's local table files and the blob files they
// reference, each once.
func ListLive(db *pebble.DB) (LiveFiles, error) {
	levels, err := db.SSTables()
	if err != nil {
		return LiveFiles{}, fmt.Errorf("list tables: %w", err)
	}
	var out LiveFiles
	seen, seenBlob := map[uint64]bool{}, map[uint64]bool{}
	for _, level := range levels {
		for _, t := range level {
			if num := uint64(t.BackingSSTNum); t.BackingType == pebble.BackingTypeLocal && !seen[num] {
				seen[num] = true
				out.Tables = append(out.Tables, num)
			}
			for _, id := range t.GetBlobReferenceFiles() {
				if !seenBlob[uint64(id)] {
					seenBlob[uint64(id)] = true
					out.Blobs = append(out.Blobs, uint64(id))
				}
			}
		}
	}
	slices.Sort(out.Blobs)
	return out, nil
}

// damaged leaves the marker for a table that failed its checksums and
// returns ErrDamaged with the repair.
func (h *Home) damaged(name string, cause error) error {
	return h.Damaged(fmt.Errorf("scrub: table %s: %w", name, cause))
}

// Damaged leaves the marker for a read of the live keyspace that met
// damaged bytes (IsDamage) and returns ErrDamaged naming the cause and
// the repair, so the next open refuses as this caller must.
func (h *Home) Damaged(cause error) error {
	if errors.Is(cause, ErrDamaged) {
		return cause // marked where it was found
	}
	msg := firstLine(cause.Error())
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

// verifyBlob reads one blob file outside the DB's cache and checks the
// checksum of its index block and of every value block the index lists.
// It returns the file's size.
func verifyBlob(ctx context.Context, fs vfs.FS, name string) (int64, error) {
	f, err := fs.Open(name)
	if err != nil {
		return 0, err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		return 0, errors.Join(err, f.Close())
	}
	r, err := blob.NewFileReader(ctx, readable, blob.FileReaderOptions{})
	if err != nil {
		return 0, errors.Join(err, readable.Close())
	}
	size := readable.Size()
	return size, errors.Join(verifyBlobBlocks(ctx, r), r.Close())
}

// verifyBlobBlocks reads the index block (which checks its checksum),
// takes the value blocks' offsets from it and reads each value block.
// The index is Pebble's columnar block (sstable/blob/blocks.go): a 4-byte
// count of virtual blocks, then a column of virtual block mappings and a
// column of n+1 offsets for n value blocks, each block followed by its
// trailer. Decoding panics on a malformed block; that is damage too.
func verifyBlobBlocks(ctx context.Context, r *blob.FileReader) (err error) {
	ih, err := r.ReadIndexBlock(ctx, block.NoReadEnv, nil)
	if err != nil {
		return err
	}
	defer ih.Release()
	var handles []block.Handle
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("blob index block: %v", p)
			}
		}()
		const customHeader, virtualCol, offsetsCol = 4, 0, 1
		data := ih.BlockData()
		if len(data) < customHeader {
			panic("too short")
		}
		var d colblk.BlockDecoder
		d.Init(data, customHeader)
		virtual := int(binary.LittleEndian.Uint32(data))
		_ = colblk.DecodeColumn(&d, virtualCol, virtual, colblk.DataTypeUint, colblk.DecodeUnsafeUints)
		offs := colblk.DecodeColumn(&d, offsetsCol, d.Rows()+1, colblk.DataTypeUint, colblk.DecodeUnsafeUints)
		for i := range d.Rows() {
			start, end := offs.At(i), offs.At(i+1)
			if end < start+block.TrailerLen || end > r.IndexHandle().Offset {
				panic(fmt.Sprintf("block %d at [%d, %d) outside the values", i, start, end))
			}
			handles = append(handles, block.Handle{Offset: start, Length: end - start - block.TrailerLen})
		}
	}()
	if err != nil {
		return err
	}
	for _, h := range handles {
		vh, err := r.ReadValueBlock(ctx, block.NoReadEnv, nil, h)
		if err != nil {
			return err
		}
		vh.Release()
	}
	return nil
}

// readerOptions are the options OpenDB's tables are read with: the
// comparer, key schemas and filter policy Pebble wrote them under.
func readerOptions() sstable.ReaderOptions {
	po := &pebble.Options{FormatMajorVersion: pebbleFormat}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(bloomBitsPerKey)
	}
	po.EnsureDefaults()
	return po.MakeReaderOptions()
}
