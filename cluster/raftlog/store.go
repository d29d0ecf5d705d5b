package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"runtime/debug"
	"sync/atomic"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/dockethq/docket/fsm"
)

// ErrRaftStoreCorrupt means raft.db holds a log entry or a stable value
// (term, vote) that fails its checksum or contradicts the rest of the file.
// The node refuses to start on it, or, found while running, stops serving
// (Node.LogFault). Repair: the README's "Damage and repair".
var ErrRaftStoreCorrupt = errors.New("raft store corrupt")

// A stored entry's Extensions are logSumMagic, the CRC-32C of the entry
// (entrySum), then the entry's own Extensions. Stable values are the value
// followed by the CRC-32C of key and value.
const (
	logSumMagic  = "dks1"
	logSumLen    = len(logSumMagic) + 4
	stableSumLen = 4
	formatV1     = 1
)

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)

	// keyLogFormat marks a raft.db whose entries and stable values carry
	// checksums. Its value is the format version and the last index written
	// before checksums existed (0 for a raft.db born with them).
	keyLogFormat = []byte("DocketLogFormat")

	// Raft's own stable keys (hashicorp/raft's raft.go).
	keyCurrentTerm  = []byte("CurrentTerm")
	keyLastVoteTerm = []byte("LastVoteTerm")
	keyLastVoteCand = []byte("LastVoteCand")
)

// logBackend is a Raft log and stable store that Store seals:
// BoltDB's raft.db (the default) or raft-wal's segment files (walstore.go).
type logBackend interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// Store is the Raft log and stable store with a checksum on
// every entry and value. It sits under raft.NewLogCache, so what it checks
// is what the disk gave back; the cache holds entries it already checked on
// the way in. Reads never return a damaged entry or value: they return an
// error wrapping ErrRaftStoreCorrupt and report it to onFault.
type Store struct {
	base logBackend
	path string
	log  *slog.Logger

	// legacyThrough is the last index written before this raft.db had
	// checksums; entries up to it may lack one.
	legacyThrough uint64
	// OnFault, when set, hears of damage found while running. Set it
	// before Raft starts.
	OnFault func(error)
	closed  atomic.Bool
	refused atomic.Uint64 // the last index StoreLogs refused, to log it once
	sizes   Sizes         // bytes per entry, for the log byte budget
	// snapIndex is the newest snapshot's index VerifyLog was given.
	snapIndex uint64
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// OpenBolt opens raft.db at path and checks its format marker and
// stable values. A raft.db written before checksums is adopted: its stable
// values are sealed, and its entries up to the current last index stay
// readable unchecked (DESIGN.md, "Checksums").
func OpenBolt(path string, log *slog.Logger) (*Store, error) {
	return openCheckedStoreWith(raftboltdb.Options{Path: path}, log)
}

// openCheckedStoreWith is openCheckedStore with BoltDB's options; the
// benchmark turns fsync off with them to see the checksums' own cost.
func openCheckedStoreWith(opts raftboltdb.Options, log *slog.Logger) (*Store, error) {
	path := opts.Path
	b, err := raftboltdb.New(opts)
	if err != nil {
		return nil, fmt.Errorf("raft store %s: %w", path, err)
	}
	return newCheckedStore(b, path, log)
}

// newCheckedStore puts the checksums over an open backend, and closes it if
// its format or stable values fail their checks.
func newCheckedStore(b logBackend, path string, log *slog.Logger) (*Store, error) {
	s := &Store{base: b, path: path, log: log}
	if err := s.openFormat(); err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return s, nil
}

// corrupt wraps a finding in ErrRaftStoreCorrupt with the file's path.
func (s *Store) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrRaftStoreCorrupt, s.path, fmt.Sprintf(format, args...))
}

// guard turns a panic or memory fault on damaged bytes into an error:
// bbolt trusts its pages and raft-wal its frame lengths, and both panic
// on impossible ones.
func (s *Store) guard(err *error) {
	if r := recover(); r != nil {
		*err = s.corrupt("%s: %v", s.kind(), r)
	}
}

// kind names the backend in a finding, so an operator reads which store's
// files are damaged.
func (s *Store) kind() string {
	if _, ok := s.base.(walBackend); ok {
		return "raft-wal"
	}
	return "bolt"
}

func (s *Store) openFormat() (err error) {
	defer s.guard(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	v, err := s.Get(keyLogFormat)
	if err == nil {
		if len(v) != 9 || v[0] != formatV1 {
			return s.corrupt("format marker %x", v)
		}
		s.legacyThrough = binary.BigEndian.Uint64(v[1:])
		return s.checkStable()
	}
	if !isNotFound(err) {
		return err
	}
	// No marker: a new raft.db, or one from a build before checksums.
	last, err := s.base.LastIndex()
	if err != nil {
		return s.corrupt("last index: %v", err)
	}
	if last > 0 {
		var l raft.Log
		if err := s.base.GetLog(last, &l); err != nil {
			return s.corrupt("entry %d: %v", last, err)
		}
		if len(l.Extensions) >= logSumLen && string(l.Extensions[:len(logSumMagic)]) == logSumMagic {
			return s.corrupt("entries carry checksums but the format marker is missing")
		}
	}
	adopted := false
	for _, k := range [][]byte{keyCurrentTerm, keyLastVoteTerm, keyLastVoteCand} {
		raw, err := s.base.Get(k)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return s.corrupt("%s: %v", k, err)
		}
		if _, err := s.unseal(k, raw); err == nil {
			continue // sealed by an adoption that a crash interrupted
		}
		if err := s.Set(k, raw); err != nil {
			return fmt.Errorf("raft store %s: seal %s: %w", s.path, k, err)
		}
		adopted = true
	}
	if last > 0 || adopted {
		s.log.Warn("raft.db predates log checksums: its existing entries are read unchecked until compacted away",
			"file", s.path, "unchecked_through", last)
	}
	s.legacyThrough = last
	marker := make([]byte, 9)
	marker[0] = formatV1
	binary.BigEndian.PutUint64(marker[1:], last)
	if err := s.Set(keyLogFormat, marker); err != nil {
		return fmt.Errorf("raft store %s: write format marker: %w", s.path, err)
	}
	return s.checkStable()
}

// checkStable reads term and vote through their checksums and checks that
// they agree: Raft writes the vote's term before its candidate, and the
// current term before either.
func (s *Store) checkStable() error {
	term, err := s.GetUint64(keyCurrentTerm)
	if err != nil && !isNotFound(err) {
		return err
	}
	voteTerm, vtErr := s.GetUint64(keyLastVoteTerm)
	if vtErr != nil && !isNotFound(vtErr) {
		return vtErr
	}
	_, vcErr := s.Get(keyLastVoteCand)
	if vcErr != nil && !isNotFound(vcErr) {
		return vcErr
	}
	if vcErr == nil && vtErr != nil {
		return s.corrupt("a vote's candidate without its term")
	}
	if vtErr == nil && voteTerm > term {
		return s.corrupt("vote in term %d beyond the current term %d", voteTerm, term)
	}
	return nil
}

// VerifyLog reads every entry once, before Raft starts, so a damaged one
// stops the start with an error instead of Raft's panic in its
// configuration scan or apply. The log must start at or below snapIndex+1
// and run without a gap after snapIndex, and no entry may be of a term
// beyond the current term.
func (s *Store) VerifyLog(snapIndex uint64) (err error) {
	s.snapIndex = snapIndex
	defer s.guard(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	first, err := s.base.FirstIndex()
	if err != nil {
		return s.corrupt("first index: %v", err)
	}
	last, err := s.base.LastIndex()
	if err != nil {
		return s.corrupt("last index: %v", err)
	}
	if last == 0 {
		return nil
	}
	if first == 0 || first > snapIndex+1 {
		return s.corrupt("log starts at %d, the newest snapshot ends at %d", first, snapIndex)
	}
	var l raft.Log
	for i := first; i <= last; i++ {
		err := s.GetLog(i, &l)
		if errors.Is(err, raft.ErrLogNotFound) && i <= snapIndex {
			// A follower that installed a snapshot keeps its older entries
			// until a later compaction: the log may jump to the entries
			// after the snapshot, which Raft never reads below.
			i = snapIndex
			continue
		}
		if errors.Is(err, raft.ErrLogNotFound) {
			return s.corrupt("entry %d missing from a log of %d-%d (snapshot at %d)", i, first, last, snapIndex)
		}
		if err != nil {
			return err
		}
		s.sizes.add(i, entryBytes(&l))
	}
	term, err := s.GetUint64(keyCurrentTerm)
	if err != nil && !isNotFound(err) {
		return err
	}
	if l.Term > term {
		return s.corrupt("entry %d of term %d beyond the current term %d", last, l.Term, term)
	}
	return nil
}

// entrySum is the CRC-32C of what an entry means: index, term, type, the
// leader's append time, data and the entry's own extensions.
func entrySum(l *raft.Log, ext []byte) uint32 {
	var h [33]byte
	binary.BigEndian.PutUint64(h[0:], l.Index)
	binary.BigEndian.PutUint64(h[8:], l.Term)
	h[16] = byte(l.Type)
	binary.BigEndian.PutUint64(h[17:], uint64(l.AppendedAt.UnixNano()))
	binary.BigEndian.PutUint64(h[25:], uint64(len(l.Data)))
	c := crc32.Update(0, castagnoli, h[:])
	c = crc32.Update(c, castagnoli, l.Data)
	return crc32.Update(c, castagnoli, ext)
}

// VerifyApplied refuses a log that ends before an entry the keyspace
// applied, when no snapshot covers it. A node applies only entries its
// own log stored and fsync'd, and Raft truncates a log's tail only above
// the commit index, so such a log lost entries it had: raft-wal, opening
// an active segment with a damaged frame, keeps the entries before it and
// drops the rest without an error. Such a node started and caught up from
// the leader, though entries it had acknowledged (and counted towards
// their commit) were gone, which another failure could turn into a lost
// write. Call it after VerifyLog, with the keyspace's durable applied
// index.
func (s *Store) VerifyApplied(applied uint64) error {
	last, err := s.base.LastIndex()
	if err != nil {
		return s.corrupt("last index: %v", err)
	}
	if applied > last && applied > s.snapIndex {
		return s.corrupt("the log ends at entry %d and the newest snapshot at %d, but this node applied entry %d: the log lost entries it had stored", last, s.snapIndex, applied)
	}
	return nil
}

// GetLog reads entry idx and checks it. It serves Raft's apply,
// replication and configuration scans alike.
func (s *Store) GetLog(idx uint64, l *raft.Log) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = s.fault(s.corrupt("entry %d: %s: %v", idx, s.kind(), r))
		}
		if err != nil && !errors.Is(err, raft.ErrLogNotFound) {
			*l = raft.Log{} // never the damaged entry
		}
	}()
	if s.belowFirst(idx) {
		return raft.ErrLogNotFound
	}
	if err := s.base.GetLog(idx, l); err != nil {
		if errors.Is(err, raft.ErrLogNotFound) || s.closed.Load() {
			return err
		}
		return s.fault(s.corrupt("entry %d: %v", idx, err))
	}
	if l.Index != idx {
		return s.fault(s.corrupt("entry %d reads back as entry %d", idx, l.Index))
	}
	ext := l.Extensions
	if len(ext) < logSumLen || string(ext[:len(logSumMagic)]) != logSumMagic {
		if idx <= s.legacyThrough {
			return nil
		}
		return s.fault(s.corrupt("entry %d carries no checksum", idx))
	}
	want, own := binary.BigEndian.Uint32(ext[len(logSumMagic):logSumLen]), ext[logSumLen:]
	if got := entrySum(l, own); got != want {
		return s.fault(s.corrupt("entry %d (term %d): checksum %08x, stored %08x", idx, l.Term, got, want))
	}
	if len(own) == 0 {
		own = nil
	}
	l.Extensions = own
	return nil
}

// belowFirst reports whether idx lies below the log's first index on a
// store that would still answer it. raft-wal drops a deleted head only
// with its segment file, so it answered entries it no longer counts; Raft
// then caught a lagging follower up from them rather than by snapshot,
// unlike on raft.db, and compaction's contract ("gone below the first
// index") held on one store only. raft-wal's FirstIndex is a read of its
// in-memory state; raft.db answers ErrLogNotFound on its own, and asking
// its FirstIndex would cost a second transaction per read.
func (s *Store) belowFirst(idx uint64) bool {
	if _, ok := s.base.(walBackend); !ok {
		return false
	}
	first, err := s.base.FirstIndex()
	return err == nil && first > 0 && idx < first
}

// fault logs damage found while running and reports it.
func (s *Store) fault(err error) error {
	s.log.Error("raft log store damaged: this node stops serving until it is repaired", "file", s.path, "err", err)
	if s.OnFault != nil {
		s.OnFault(err)
	}
	return err
}

// StoreLog stores one entry; see StoreLogs.
func (s *Store) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs checks each command against its proposer's checksum, then
// stores sealed copies: the caller's entries stay as they are, since the
// LogCache keeps them. One damaged entry refuses the whole batch; on a
// follower Raft answers the leader with a failure and never applies it.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	extBytes := 0
	for _, l := range logs {
		if err := fsm.VerifyCommand(l); err != nil {
			if s.refused.Swap(l.Index) != l.Index {
				s.log.Error("refusing a damaged log entry", "file", s.path, "index", l.Index, "err", err)
			}
			return fmt.Errorf("store entry %d in %s: %w", l.Index, s.path, err)
		}
		extBytes += logSumLen + len(l.Extensions)
	}
	copies := make([]raft.Log, len(logs))
	sealed := make([]*raft.Log, len(logs))
	slab := make([]byte, extBytes)
	for i, l := range logs {
		n := logSumLen + len(l.Extensions)
		ext := slab[:n:n]
		slab = slab[n:]
		copy(ext, logSumMagic)
		binary.BigEndian.PutUint32(ext[len(logSumMagic):], entrySum(l, l.Extensions))
		copy(ext[logSumLen:], l.Extensions)
		copies[i] = *l
		copies[i].Extensions = ext
		sealed[i] = &copies[i]
	}
	if err := s.base.StoreLogs(sealed); err != nil {
		return err
	}
	s.sizes.addAll(logs)
	return nil
}

// FirstIndex is the first index in the log, 0 when empty.
func (s *Store) FirstIndex() (uint64, error) { return s.base.FirstIndex() }

// LastIndex is the last index in the log, 0 when empty.
func (s *Store) LastIndex() (uint64, error) { return s.base.LastIndex() }

// IsMonotonic passes the backend's answer on (raft.MonotonicLogStore):
// raft-wal refuses a gap, so after installing a snapshot Raft must empty
// it rather than leave the old entries below a gap, as it does in raft.db.
func (s *Store) IsMonotonic() bool {
	m, ok := s.base.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// DeleteRange deletes entries min..max inclusive.
func (s *Store) DeleteRange(min, max uint64) error {
	if err := s.base.DeleteRange(min, max); err != nil {
		return err
	}
	s.sizes.deleteRange(min, max)
	return nil
}

// Set stores v under k with a checksum over both, so a value moved to
// another key fails too.
func (s *Store) Set(k, v []byte) error {
	sealed := make([]byte, len(v)+stableSumLen)
	copy(sealed, v)
	binary.BigEndian.PutUint32(sealed[len(v):], stableSum(k, v))
	return s.base.Set(k, sealed)
}

// Get reads k and checks it. A missing key is BoltDB's error unchanged
// (walBackend answers the same): Raft recognizes it by its text.
func (s *Store) Get(k []byte) ([]byte, error) {
	raw, err := s.base.Get(k)
	if err != nil {
		return nil, err
	}
	v, err := s.unseal(k, raw)
	if err != nil {
		return nil, s.fault(err)
	}
	return v, nil
}

// SetUint64 stores val as 8 bytes big-endian, checksummed like Set.
func (s *Store) SetUint64(k []byte, val uint64) error {
	return s.Set(k, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 reads a value SetUint64 stored.
func (s *Store) GetUint64(k []byte) (uint64, error) {
	v, err := s.Get(k)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, s.fault(s.corrupt("%s: %d bytes, want 8", k, len(v)))
	}
	return binary.BigEndian.Uint64(v), nil
}

func stableSum(k, v []byte) uint32 {
	return crc32.Update(crc32.Checksum(k, castagnoli), castagnoli, v)
}

func (s *Store) unseal(k, raw []byte) ([]byte, error) {
	if len(raw) < stableSumLen {
		return nil, s.corrupt("%s: %d bytes, too short for its checksum", k, len(raw))
	}
	v := raw[:len(raw)-stableSumLen]
	if got, want := stableSum(k, v), binary.BigEndian.Uint32(raw[len(v):]); got != want {
		return nil, s.corrupt("%s: checksum %08x, stored %08x", k, got, want)
	}
	return v, nil
}

// Close closes raft.db.
func (s *Store) Close() error {
	s.closed.Store(true)
	return s.base.Close()
}

// isNotFound is BoltDB's missing-key error, which Raft also matches by text.
func isNotFound(err error) bool { return err != nil && err.Error() == "not found" }

// Path is the store's file or directory, for the messages that name it.
func (s *Store) Path() string { return s.path }

// Sizes counts the bytes of the entries in the log, for the byte budget.
func (s *Store) Sizes() *Sizes { return &s.sizes }
