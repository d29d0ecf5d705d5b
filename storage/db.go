package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// DBOptions say how OpenDB opens and tunes a Pebble keyspace. They change
// speed and resource use only, never what the keyspace holds, so replicas
// may differ in them.
type DBOptions struct {
	// Logger gets Pebble's messages; nil discards them.
	Logger *slog.Logger
	// FS is the filesystem Pebble writes to; nil means the OS disk. Tests
	// pass vfs.NewCrashableMem() to drop unsynced writes.
	FS vfs.FS
	// MaxOpenFiles bounds the files Pebble keeps open (pebble.Options'
	// MaxOpenFiles, its table cache); 0 means Pebble's default, 1000.
	MaxOpenFiles int
	// MemTableBytes overrides the largest memtable (memTableBytes); 0 keeps
	// it. Writes stall once two memtables wait for a flush, so tests set it
	// small to reach a stall with a few MiB instead of 64.
	MemTableBytes int
	// OnDiskEvent, when set, receives Pebble's background errors and write
	// stalls (events.go) instead of Pebble logging each one. It is called
	// on Pebble's goroutines and must not block.
	OnDiskEvent func(DiskEvent)
	// OnDamage, when set, is called once when Pebble reports bytes on disk
	// that fail its checksums (a table or blob block met by a compaction
	// or a read), after the damage marker is written. The error wraps
	// ErrDamaged and names the file and the repair. It is called on the
	// goroutine that met the damage and must not block.
	OnDamage func(error)
	// NoCompactions turns Pebble's automatic compactions off, for tests
	// that damage a table on disk and must not have a compaction read it
	// before the code under test does.
	NoCompactions bool
	// InlineValues keeps every value inside the tables, as builds before
	// value separation did (see separateValues). It changes where bytes
	// sit on disk, never what the keyspace holds; benchmarks set it to
	// measure what separation saves.
	InlineValues bool
}

// withDefaults fills the nil fields.
func (o DBOptions) withDefaults() DBOptions {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	return o
}

// Pebble tuning, measured with the fsm benchmarks (fsm/bench_test.go). With
// Pebble's defaults nothing was cached: Pebble charges its memtables to the
// block cache, and two default memtables fill the default 8 MB cache. Every
// Get then read and checksummed blocks from the files, and enqueue (whose
// idempotency-key lookup is almost always a miss) ran at about 40k tasks/s
// whatever the batch size.
const (
	// memTableBytes is the largest memtable; Pebble grows to it from 256 KB
	// and keeps up to two (MemTableStopWritesThreshold) before stalling.
	memTableBytes = 32 << 20
	// blockCacheBytes is what the cache holds besides the memtables.
	blockCacheBytes = 128 << 20
	// bloomBitsPerKey makes a Get of an absent key (a new idempotency key)
	// skip an sstable after one filter probe, with about 1% false positives.
	bloomBitsPerKey = 10
	// l0TargetFileBytes is the target size of a flushed table (Pebble's
	// default is 2 MB); each level below doubles it. A queue's writes land
	// at its two ends: a drain rewrites or deletes the oldest tasks, a
	// fill appends the newest. Each flush's edits of the oldest tasks then
	// overlap the one table at the drain's front, and a compaction rewrote
	// that whole table, most of it tasks still waiting, once per flush.
	// Smaller tables bound what each such compaction rewrites: at a 200,000
	// backlog a task's life wrote 807 table bytes with 2 MB, 552 with
	// 512 KiB; a 1M drain's compactions wrote 252–280 bytes per task, then
	// 112–115 (BENCHMARKS.md). 256 KiB wrote less again, but cost more CPU
	// than it saved in per-table overhead.
	//
	// The price is paid by large bodies: Pebble counts a table's
	// references into blob files towards its size, so a flush cuts a
	// table (and starts a blob file) after every body of 512 KiB or more.
	// An enqueue of 1 MiB tasks costs about 20 % more for it (BENCHMARKS.md).
	// Raising the size for the lower levels only, flushing with smaller
	// split intervals, or compacting L0 later did not bring the drain's
	// saving back; only the flushed tables' size did.
	l0TargetFileBytes = 512 << 10
	// dataBlockBytes is an sstable data block's target size (Pebble's
	// default is 4 KiB). A drain's claims seek from the queue's front and
	// read the records behind it; with 4 KiB blocks a drained task missed
	// the block cache 0.17-0.19 times, each miss a read and a cgo-allocated
	// block. With 16 KiB blocks it misses 0.05 times and the in-process
	// drain of a 1M backlog costs about a tenth less CPU per task; point
	// reads (claim admission, the cycle) got faster too. 8 KiB was worse
	// than 16, 32 KiB no better (BENCHMARKS.md).
	dataBlockBytes = 16 << 10
)

// OpenDB opens (or creates) the Pebble database at path with Docket's
// tuning. Pebble's fatal errors panic with a *FatalError (pebbleLogger).
//
// Pebble's WAL is off: every write of the keyspace is either apply's,
// which the fsync'd Raft log can replay, or a restore's, which ends with a
// Flush. So writes reach disk only through memtable flushes, and a crash
// loses what was not flushed yet. Close does not flush either: callers
// that want their writes kept Flush first (fsm's Close, Persist and
// BuildRestore do). A WAL left by an older build is still replayed once
// at open.
func OpenDB(path string, o DBOptions) (*pebble.DB, error) {
	o = o.withDefaults()
	if err := checkDamage(o.FS, path); err != nil {
		return nil, err
	}
	manifest := checkManifest(o.FS, path)
	memBytes := uint64(memTableBytes)
	if o.MemTableBytes > 0 {
		memBytes = uint64(o.MemTableBytes)
	}
	cache := pebble.NewCache(blockCacheBytes + 2*int64(memBytes))
	defer cache.Unref() // the DB holds its own reference
	po := &pebble.Options{
		FS:                 o.FS,
		FormatMajorVersion: pebbleFormat,
		Logger:             pebbleLogger{log: o.Logger, fs: o.FS, dir: path},
		Cache:              cache,
		MemTableSize:       memBytes,
		MaxOpenFiles:       o.MaxOpenFiles,
		EventListener:      diskEventListener(o.OnDiskEvent),
		DisableWAL:         true,
	}
	po.TargetFileSizes[0] = l0TargetFileBytes
	if po.EventListener == nil {
		po.EventListener = &pebble.EventListener{} // Pebble fills in its defaults
	}
	watch := &damageWatch{log: o.Logger, fs: o.FS, dir: path, onDamage: o.OnDamage}
	po.EventListener.DataCorruption = watch.dataCorruption
	po.DisableAutomaticCompactions = o.NoCompactions
	if !o.InlineValues {
		po.Experimental.ValueSeparationPolicy = separateValues
	}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(bloomBitsPerKey)
		po.Levels[i].BlockSize = dataBlockBytes
	}
	db, err := openPebble(path, po, o.FS, memBytes)
	var full *DiskFullError
	if errors.As(err, &full) {
		return nil, err // its sentence names the directory already
	}
	if err != nil {
		return nil, fmt.Errorf("open pebble %s: %w", path, err)
	}
	if manifest != nil {
		manifest.report(o.Logger) // only now: when Pebble cannot open, its error says it
	}
	return db, nil
}

// FlushTimeout bounds how long Flush waits. A healthy flush of two full
// memtables takes about a second even on a slow disk; on a full disk
// Pebble retries a failed flush until space returns, and a caller that
// waited for it would hang Raft's shutdown with it.
const FlushTimeout = 30 * time.Second

// ErrFlushTimeout means a flush did not finish within its bound (a full
// or failing disk): what it would have made durable may still be only in
// memory.
var ErrFlushTimeout = errors.New("pebble flush did not finish in time")

// Flush writes db's memtables to disk and waits for them to be durable,
// for at most within. Pebble's own Flush waits for ever.
func Flush(db *pebble.DB, within time.Duration) error {
	done, err := db.AsyncFlush()
	if err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("%w (%s)", ErrFlushTimeout, within)
	}
}

// FatalError is the panic value when Pebble reports an error it cannot go
// on from (its Logger's Fatalf): an invariant broken or a write that must
// not fail. Pebble expects Fatalf not to return, so it panics; the
// process's owner decides what a panic means, and a recover above can
// tell this one from others.
type FatalError struct{ Msg string }

func (e *FatalError) Error() string { return "pebble fatal: " + e.Msg }

// pebbleLogger sends Pebble's printf-style messages to slog. dir is the
// keyspace it logs for: a fatal report of on-disk damage leaves a marker
// there (damage.go).
type pebbleLogger struct {
	log *slog.Logger
	fs  vfs.FS
	dir string
}

func (l pebbleLogger) Infof(format string, args ...interface{}) {
	l.log.Debug(fmt.Sprintf(format, args...), "source", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...interface{}) {
	l.log.Error(fmt.Sprintf(format, args...), "source", "pebble")
}

// Fatalf logs and panics rather than exiting: an os.Exit would skip every
// deferred clean-up and hide the stack from the node's owner.
func (l pebbleLogger) Fatalf(format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error(msg, "source", "pebble", "fatal", true)
	if isDamage(msg) {
		markDamaged(l.log, l.fs, l.dir, msg)
	}
	panic(&FatalError{Msg: msg})
}

// DiskMetrics is what an operator watches of a keyspace's Pebble.
type DiskMetrics struct {
	Compactions       int64  // compactions finished since open
	CompactionsFailed int64  // compactions that failed since open
	CompactionDebt    uint64 // bytes Pebble estimates it must compact to reach its shape
	L0Files           int64  // files in level 0: many means compactions lag and reads slow
	DiskBytes         uint64 // bytes on disk: tables, WAL, blobs
	// ManifestRepairs counts the opens, in this process, that found the
	// MANIFEST damaged and started from an older state (manifest.go).
	ManifestRepairs uint64
}

// Metrics reads db's metrics.
func Metrics(db *pebble.DB) DiskMetrics {
	m := db.Metrics()
	return DiskMetrics{
		Compactions:       m.Compact.Count,
		CompactionsFailed: m.Compact.FailedCount,
		CompactionDebt:    m.Compact.EstimatedDebt,
		L0Files:           m.Levels[0].TablesCount,
		DiskBytes:         m.DiskSpaceUsage(),
		ManifestRepairs:   ManifestRepairs(),
	}
}
