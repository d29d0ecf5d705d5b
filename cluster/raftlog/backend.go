package raftlog

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// Log stores a node can keep its Raft log and stable values in (--log-store).
const (
	// LogStoreBolt is raft-boltdb/v2's raft.db: BoltDB commits an append
	// with two fdatasyncs (data pages, then the meta page).
	LogStoreBolt = "bolt"
	// LogStoreWAL is hashicorp/raft-wal's segment files under raft-wal/:
	// one fdatasync per append, so a write's Raft round is shorter. New
	// data dirs get it (DefaultForNew).
	LogStoreWAL = "wal"
	// LogStoreAuto (the empty kind) opens the store the data dir holds, and
	// DefaultForNew in a data dir that holds none.
	LogStoreAuto = ""
)

// DefaultForNew is the store a data dir without a Raft log gets when no
// store is named. raft-wal passed the 45-minute chaos run with kill and
// corruption faults (jepsen/RESULTS.md) and appends with one fsync, so a
// new node starts on it; a node created on bolt stays on bolt
// (DESIGN.md, "Log stores").
const DefaultForNew = LogStoreWAL

// Resolve names the store a node in dataDir opens for kind, and why: kind
// itself when named, else the store whose files dataDir holds, else
// DefaultForNew. A data dir holding both is left to Open to refuse.
func Resolve(dataDir, kind string) (store, why string) {
	if kind != LogStoreAuto {
		return kind, "named by --log-store"
	}
	switch {
	case exists(filepath.Join(dataDir, BoltFile)):
		return LogStoreBolt, "the data dir holds " + BoltFile
	case exists(filepath.Join(dataDir, WALDir)):
		return LogStoreWAL, "the data dir holds " + WALDir + "/"
	default:
		return DefaultForNew, "a new data dir gets the default"
	}
}

// ErrLogStoreMismatch means the data dir holds the other log store's files:
// a node does not switch stores in place (see DESIGN.md, "Log stores", for how to move
// one node at a time).
var ErrLogStoreMismatch = errors.New("log store mismatch")

// BoltFile and WALDir are where each store keeps its files under the data
// dir.
const (
	BoltFile = "raft.db"
	WALDir   = "raft-wal"
)

// Open opens the store kind names (LogStoreBolt, LogStoreWAL, or
// LogStoreAuto: see Resolve) under dataDir, refusing a data dir that holds
// the other store's files: starting on the other store would see an empty
// log and stable store, so the node would forget its term and vote and
// rejoin as if new.
//
// budget is the log byte budget (--log-max-bytes; 0 for none): raft-wal's
// segments are sized to it (SegmentBytesFor).
func Open(dataDir, kind string, log *slog.Logger, budget uint64) (*Store, error) {
	kind, why := Resolve(dataDir, kind)
	log.Info("raft log store", "store", kind, "why", why)
	boltPath := filepath.Join(dataDir, BoltFile)
	walPath := filepath.Join(dataDir, WALDir)
	switch kind {
	case LogStoreBolt:
		if exists(walPath) {
			return nil, mismatch(dataDir, LogStoreBolt, LogStoreWAL, walPath)
		}
		return OpenBolt(boltPath, log)
	case LogStoreWAL:
		if exists(boltPath) {
			return nil, mismatch(dataDir, LogStoreWAL, LogStoreBolt, boltPath)
		}
		return openCheckedWALSized(walPath, log, SegmentBytesFor(budget))
	default:
		return nil, fmt.Errorf("log store %q: want %q or %q", kind, LogStoreBolt, LogStoreWAL)
	}
}

func mismatch(dir, want, have, path string) error {
	return fmt.Errorf("%w: data dir %s holds a %s log (%s) but the node was started with --log-store %s: "+
		"start it with --log-store %s, or move it to %s one node at a time (remove it from the cluster, empty its data dir, start it with --log-store %s and let it rejoin)",
		ErrLogStoreMismatch, dir, have, path, want, have, want, want)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// openCheckedWAL opens raft-wal in dir, under the same checksums as raft.db.
// raft-wal checks its own frames when it recovers a segment; the checksums
// above it also cover a damaged sealed segment and the stable values in
// its BoltDB meta file, and keep one corruption story for both stores.
func openCheckedWAL(dir string, log *slog.Logger) (*Store, error) {
	return openCheckedWALSized(dir, log, wal.DefaultSegmentSize)
}

// openCheckedWALSized is openCheckedWAL with segments of segmentBytes. The
// size applies to segments created from now on; existing ones keep theirs.
func openCheckedWALSized(dir string, log *slog.Logger, segmentBytes int) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("raft-wal dir: %w", err)
	}
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(dir, wal.WithLogger(NewHCLog(log, "raft-wal")), wal.WithMetaStore(meta), wal.WithSegmentSize(segmentBytes))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("raft-wal %s: %w", dir, err), meta.Close())
	}
	return newCheckedStore(walBackend{WAL: w}, dir, log)
}

// errStableNotFound is the missing-key error Raft matches by its text, as
// BoltDB returns it.
var errStableNotFound = errors.New("not found")

// walBackend is raft-wal with BoltDB's answer for a missing stable key:
// raft-wal returns no value and no error, which Store would read as
// a value too short for its checksum. Its Close (from v0.4.1 on) also
// closes the meta file; v0.4.0 left it open and flock'd, which is why the
// module is pinned at v0.4.2 or later (also for raft-wal #31, see
// Test_WALStoreTailTruncationSurvivesKill).
type walBackend struct {
	*wal.WAL
}

func (w walBackend) Get(k []byte) ([]byte, error) {
	v, err := w.WAL.Get(k)
	if err == nil && v == nil {
		return nil, errStableNotFound
	}
	return v, err
}

func (w walBackend) GetUint64(k []byte) (uint64, error) {
	v, err := w.Get(k)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raft-wal stable key %s: %d bytes, want 8", k, len(v))
	}
	return w.WAL.GetUint64(k)
}
