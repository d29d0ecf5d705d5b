package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// CheckEvent is a consistency-check entry the FSM applied (see
// cluster/checker.go for the protocol). Exactly one of View and Result is
// set.
type CheckEvent struct {
	// Index is the log index of the entry.
	Index uint64
	// Term is, for a Check entry, the term of the leader that proposed it.
	Term uint64
	// View is, for a Check entry, the keyspace exactly as it stood right
	// after the entry was applied. The receiver owns it and must Release it.
	View *CheckView
	// Urgent is, for a Check entry, its CheckCmd's urgent: the leader asks
	// every voter to hash it at full speed.
	Urgent bool
	// Result is, for an accepted CheckResult entry, the hash the majority
	// recorded for the keyspace at Result.CheckIndex.
	Result *pb.CheckResultCmd
}

// SetCheckObserver registers fn to receive consistency-check entries as
// they apply, on Raft's apply goroutine: it must not block, so hashing a
// View belongs on another goroutine. Without an observer no snapshot is
// taken. nil removes it.
func (f *FSM) SetCheckObserver(fn func(CheckEvent)) {
	if fn == nil {
		f.checkObs.Store(nil)
		return
	}
	f.checkObs.Store(&fn)
}

// emitChecks hands the batch's CheckResult entries, then the snapshot of a
// Check entry that ended the batch (check > 0, urgent as its CheckCmd
// says), to the check observer.
// Both come after the batch committed, in log order: a CheckResult always
// precedes the Check that ends its batch.
func (f *FSM) emitChecks(results []CheckEvent, check, term uint64, urgent bool) {
	fnp := f.checkObs.Load()
	if fnp == nil {
		return
	}
	for _, ev := range results {
		(*fnp)(ev)
	}
	if check == 0 {
		return
	}
	s, err := f.Snapshot()
	if err != nil {
		return // closed under us: the node is stopping and checks nothing
	}
	(*fnp)(CheckEvent{Index: check, Term: term, View: &CheckView{s: s.(*fsmSnapshot)}, Urgent: urgent})
}

// checkResult accepts a CheckResult whose check index lies before its own
// entry; any other is rejected, the same way on every replica.
func (tx *txn) checkResult(c *pb.CheckResultCmd, res *pb.CommandResult) {
	if c.GetCheckIndex() >= tx.index {
		res.ErrorCode, res.ErrorField = pb.Code_CODE_INVALID_ARGUMENT, "check_index"
		res.ErrorDetail = fmt.Sprintf("%d is not before this entry (%d)", c.GetCheckIndex(), tx.index)
		return
	}
	tx.checks = append(tx.checks, CheckEvent{Index: tx.index, Result: c})
}

// validateCheckResult checks the shape of a CheckResult: a check index and
// a hash as Hash writes it.
func validateCheckResult(c *pb.CheckResultCmd) error {
	if c.GetCheckIndex() == 0 {
		return fieldErr("check_index", "required")
	}
	if h := c.GetHash(); len(h) != 2*sha256.Size {
		return fieldErr("hash", "want %d hex digits, got %d", 2*sha256.Size, len(h))
	} else if _, err := hex.DecodeString(h); err != nil {
		return fieldErr("hash", "not hex: %v", err)
	}
	if c.GetAgreeing() > c.GetVoters() {
		return fieldErr("agreeing", "%d agreeing of %d voters", c.GetAgreeing(), c.GetVoters())
	}
	return nil
}

// CheckView is a Pebble snapshot of the keyspace at a Check entry's index.
// It is registered like a Raft snapshot, so a Restore or Close that comes
// first closes it and Hash then fails instead of reading a closed database.
type CheckView struct{ s *fsmSnapshot }

// Index is the applied index the view was taken at.
func (v *CheckView) Index() uint64 { return v.s.applied }

// Hash is the keyspace hash of the view, as FSM.Hash would have answered
// at Index. It reads every key at full speed; call it off the apply
// goroutine.
func (v *CheckView) Hash() (string, error) {
	return v.HashChunked(func(int64) error { return nil })
}

// hashChunk is how many bytes of keys and values HashChunked reads in one
// go, under one hold of the FSM's lock, before the caller's pacing: small
// enough that a Restore waiting for the lock (and the applies queued
// behind it) waits well under a millisecond, and that a chunk of cold
// blocks (about 15 ms of CPU per MiB) is no burst a claim waits behind.
// At a 1M-task backlog, claim p99 while a paced hash ran was 2.10x the
// empty queue's in the median of three runs with 1 MiB chunks, 1.58x of
// four with 64 KiB (1.75x of two with 16 KiB; BENCHMARKS.md, round 3).
const hashChunk = 64 << 10

// HashChunked is Hash read in chunks of about a MiB of keys and values,
// the FSM's lock held per chunk only. After each chunk it calls between
// with the bytes read so far; an error from between ends the hash with
// it. The caller paces the hash there (the consistency checker holds it
// to a rate, cluster's Config.CheckRate), so that reading the clock stays
// out of the FSM. The result is the same however it is paced: one
// SHA-256 over the keys in order, from the same Pebble snapshot.
func (v *CheckView) HashChunked(between func(read int64) error) (string, error) {
	h := sha256.New()
	var lenBuf [8]byte
	var lower []byte
	read := int64(0)
	for {
		var last []byte
		chunk := 0
		err := v.s.read(func(r storage.Reader) error {
			return storage.Scan(r, lower, nil, 0, func(k, val []byte) error {
				binary.BigEndian.PutUint32(lenBuf[:4], uint32(len(k)))
				binary.BigEndian.PutUint32(lenBuf[4:], uint32(len(val)))
				h.Write(lenBuf[:])
				h.Write(k)
				h.Write(val)
				chunk += len(k) + len(val)
				if chunk >= hashChunk {
					last = append(last[:0], k...)
					return storage.ErrStop
				}
				return nil
			})
		})
		if err != nil {
			return "", fmt.Errorf("check hash at %d: %w", v.s.applied, err)
		}
		if last == nil {
			return hex.EncodeToString(h.Sum(nil)), nil // the scan reached the end
		}
		lower = append(last, 0) // the next key after last
		read += int64(chunk)
		if err := between(read); err != nil {
			return "", fmt.Errorf("check hash at %d: %w", v.s.applied, err)
		}
	}
}

// Release frees the snapshot. It is safe to call more than once.
func (v *CheckView) Release() { v.s.Release() }

// read runs fn over the snapshot while the keyspace cannot be swapped.
func (s *fsmSnapshot) read(fn func(storage.Reader) error) error {
	s.f.mu.RLock()
	defer s.f.mu.RUnlock()
	s.f.snapMu.Lock()
	snap := s.snap
	s.f.snapMu.Unlock()
	if snap == nil {
		return errSnapshotReplaced
	}
	// A check's hash or a snapshot for a follower that meets damaged
	// bytes must stop this node, not only fail: a check failed that way
	// again at every round and left the node waiting on it for ever.
	err := fn(storage.Wrap(snap))
	if storage.IsDamage(err) {
		return s.f.keyspaceDamaged(err)
	}
	return err
}

// Hash is a SHA-256 over every key and value in order: two replicas that
// applied the same log have the same hash.
func (f *FSM) Hash() (string, error) {
	r, release, err := f.reader()
	if err != nil {
		return "", err
	}
	defer release()
	return hashKeyspace(r)
}

// hashKeyspace hashes every key of r, nothing excluded: a replica must
// agree with the others on all of it, metadata included.
func hashKeyspace(r storage.Reader) (string, error) {
	h := sha256.New()
	var lenBuf [8]byte
	err := storage.Scan(r, nil, nil, 0, func(k, v []byte) error {
		binary.BigEndian.PutUint32(lenBuf[:4], uint32(len(k)))
		binary.BigEndian.PutUint32(lenBuf[4:], uint32(len(v)))
		h.Write(lenBuf[:])
		h.Write(k)
		h.Write(v)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
