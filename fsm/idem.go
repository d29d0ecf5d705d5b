package fsm

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// The idempotency index: for each idempotency key a live task holds, the
// task's id, in memory. An enqueue asks it whether its key is taken, and a
// task's removal gives its key back. It is rebuilt from the task records
// (each record keeps its key) at Open and Restore, with the ready order and
// under its lock and staleness, so a batch that does not commit leaves
// nothing behind: the next one rebuilds it from the committed records.
//
// From LevelIdemInMemory on it is the only index of the keys: apply
// writes no i/ key, and the latch deletes the i/ range. Below it apply
// still sets and deletes the i/ keys an older build reads, as it did, but
// decides from the index at every level, so a mixed cluster writes the
// same bytes. The two agree: an i/ key names the newest live task with
// its key, or a task that is gone, which both readings take for "absent".
//
// Why memory: the Go client gives every task a key, so each life set one
// i/ key and its removal read and deleted it again, and the keys of every
// retained task rode through the compactions. The index costs about 40
// bytes a live key (a Go map of two integers); DESIGN.md weighs it.

// idemHash is the index's hash of an i/ key: a variable so that a test can
// make every key collide.
var idemHash = xxhash.Sum64

// idemIndex maps each live idempotency key to its task's packed id
// (packID). Keys are stored as their 64-bit hash; a key whose hash another
// live key already holds goes to clash by its bytes. A hash match is
// confirmed against the task's record (owns), so the answers are exact.
type idemIndex struct {
	byHash map[uint64]uint64
	clash  map[string]uint64 // usually empty
	// free is a hash the last lookup found absent from byHash, while
	// freeOK says nothing changed the index since. An enqueue looks its
	// key up and then sets it, and with a key on every task the map holds
	// millions: each probe of an absent hash is a trip to memory, and such
	// probes were most of the 9 % of the nodes' CPU the index took in a
	// batched enqueue. set skips the second one.
	free   uint64
	freeOK bool
}

func newIdemIndex() *idemIndex { return &idemIndex{byHash: map[uint64]uint64{}} }

// idemOwner reports whether the task with packed id holds i/ key ik.
type idemOwner func(id uint64, ik []byte) (bool, error)

// lookup returns the task holding ik.
func (x *idemIndex) lookup(ik []byte, owns idemOwner) (uint64, bool, error) {
	if len(x.clash) > 0 {
		if id, ok := x.clash[string(ik)]; ok {
			return id, true, nil
		}
	}
	h := idemHash(ik)
	id, ok := x.byHash[h]
	if !ok {
		x.free, x.freeOK = h, true
		return 0, false, nil
	}
	same, err := owns(id, ik)
	if err != nil {
		return 0, false, err
	}
	return id, same, nil
}

// set gives ik to the task id. The caller found ik absent, or held by a
// task that is gone; a live holder of the same key (which only a bug
// makes) is replaced, as the i/ key was.
func (x *idemIndex) set(ik []byte, id uint64, owns idemOwner) error {
	h, free := idemHash(ik), x.freeOK
	x.freeOK = false
	if _, ok := x.clash[string(ik)]; ok {
		x.clash[string(ik)] = id
		return nil
	}
	if free && h == x.free {
		x.byHash[h] = id
		return nil
	}
	if old, ok := x.byHash[h]; ok && old != id {
		same, err := owns(old, ik)
		if err != nil {
			return err
		}
		if !same {
			if x.clash == nil {
				x.clash = map[string]uint64{}
			}
			x.clash[string(ik)] = id
			return nil
		}
	}
	x.byHash[h] = id
	return nil
}

// remove takes ik from the task id, if that task holds it, and reports
// whether it did: a newer task may hold the key.
func (x *idemIndex) remove(ik []byte, id uint64) bool {
	x.freeOK = false
	if got, ok := x.clash[string(ik)]; ok {
		if got != id {
			return false
		}
		delete(x.clash, string(ik))
		return true
	}
	h := idemHash(ik)
	if got, ok := x.byHash[h]; ok && got == id {
		delete(x.byHash, h)
		return true
	}
	return false
}

// len is the number of keys held.
func (x *idemIndex) len() int { return len(x.byHash) + len(x.clash) }

// taskIdemKey is t's i/ key, nil when it has none.
func taskIdemKey(t *pb.Task) []byte {
	if t.GetIdempotencyKey() == "" {
		return nil
	}
	return storage.IdemKey(t.GetQueue(), t.GetTenant(), t.GetIdempotencyKey())
}

// recordOwner confirms a hash match from the records r holds: what a
// rebuild asks, outside any batch.
func recordOwner(r storage.Reader) idemOwner {
	return func(id uint64, ik []byte) (bool, error) {
		t, _, err := storage.GetTaskRecord(r, unpackID(id))
		if errors.Is(err, storage.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("idempotency index: task %s: %w", unpackID(id), err)
		}
		return bytes.Equal(taskIdemKey(t), ik), nil
	}
}

// owner confirms a hash match from the batch's records.
func (tx *txn) owner(id uint64, ik []byte) (bool, error) {
	t, ok, err := tx.getTask(unpackID(id))
	if err != nil || !ok {
		return false, err
	}
	return bytes.Equal(taskIdemKey(t), ik), nil
}

// idemTask returns the live task holding i/ key ik.
func (tx *txn) idemTask(ik []byte) (*pb.Task, bool, error) {
	id, ok, err := tx.ready.idem.lookup(ik, tx.owner)
	if err != nil || !ok {
		return nil, false, err
	}
	t, ok, err := tx.getTask(unpackID(id))
	if err != nil {
		return nil, false, fmt.Errorf("idempotency key: %w", err)
	}
	return t, ok, nil
}

// setIdem gives ik to the new task id, and below LevelIdemInMemory stores
// the i/ key an older build reads.
func (tx *txn) setIdem(ik []byte, id string) error {
	packed, ok := packID(id)
	if !ok {
		return fmt.Errorf("idempotency key: task id %q does not pack", id)
	}
	if err := tx.ready.idem.set(ik, packed, tx.owner); err != nil {
		return err
	}
	if tx.feature >= LevelIdemInMemory {
		return nil
	}
	if err := tx.b.Set(ik, []byte(id), nil); err != nil {
		return fmt.Errorf("idempotency key: %w", err)
	}
	return nil
}

// dropIdem gives back the key of t, which is being removed, if t holds it;
// below LevelIdemInMemory it deletes the i/ key too.
func (tx *txn) dropIdem(t *pb.Task) error {
	ik := taskIdemKey(t)
	if ik == nil {
		return nil
	}
	packed, ok := packID(t.GetId())
	if !ok || !tx.ready.idem.remove(ik, packed) || tx.feature >= LevelIdemInMemory {
		return nil
	}
	if err := tx.b.Delete(ik, nil); err != nil {
		return fmt.Errorf("remove %s: idempotency key: %w", t.GetId(), err)
	}
	return nil
}

// dropIdemKeys deletes the i/ range at the latch of LevelIdemInMemory:
// from then on the index is the only record of the keys, on every replica
// at the same entry.
func (tx *txn) dropIdemKeys() error {
	prefix := storage.IdemPrefix()
	if err := tx.b.DeleteRange(prefix, storage.PrefixEnd(prefix), nil); err != nil {
		return fmt.Errorf("drop the idempotency keys: %w", err)
	}
	return nil
}
