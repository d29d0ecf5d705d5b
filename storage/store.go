package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"
)

// ErrNotFound means the key or task does not exist.
var ErrNotFound = errors.New("not found")

// Reader is what every read helper needs: a DB, a snapshot or an indexed
// batch (which sees its own uncommitted writes).
type Reader interface {
	Get(key []byte) ([]byte, interface{ Close() error }, error)
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

// pebbleReader adapts pebble.Reader, whose Get returns an io.Closer.
type pebbleReader struct{ r pebble.Reader }

func (p pebbleReader) Get(key []byte) ([]byte, interface{ Close() error }, error) {
	return p.r.Get(key)
}

func (p pebbleReader) NewIter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	return p.r.NewIter(o)
}

// Wrap turns a pebble.Reader (DB, Snapshot, indexed Batch) into a Reader.
func Wrap(r pebble.Reader) Reader { return pebbleReader{r} }

// Writer is the write half of a Pebble batch. Like Pebble's batch, a
// Writer keeps neither key nor value past its Set: the caller may reuse
// them (the task records' encoding buffers do).
type Writer interface {
	Set(key, value []byte, o *pebble.WriteOptions) error
	Delete(key []byte, o *pebble.WriteOptions) error
}

var marshal = proto.MarshalOptions{Deterministic: true}

// getCopy reads a key and copies the value out, so callers never hold a
// Pebble closer.
func getCopy(r Reader, key []byte) ([]byte, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", key, err)
	}
	out := append([]byte(nil), v...)
	if err := closer.Close(); err != nil {
		return nil, fmt.Errorf("get %q: close: %w", key, err)
	}
	return out, nil
}

// SetIndex writes an index key with an empty value.
func SetIndex(w Writer, key []byte) error { return w.Set(key, nil, nil) }

// GetString reads a key whose value is a string (idempotency index).
func GetString(r Reader, key []byte) (string, error) {
	v, err := getCopy(r, key)
	if err != nil {
		return "", err
	}
	return string(v), nil
}

// GetUint64 reads a big-endian uint64; a missing key reads as 0.
func GetUint64(r Reader, key []byte) (uint64, error) {
	v, err := getCopy(r, key)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("uint64 at %q: %d bytes", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// SetUint64 writes a big-endian uint64.
func SetUint64(w Writer, key []byte, v uint64) error {
	return w.Set(key, PutUint64(nil, v), nil)
}

// Scan calls fn for each key in [lower, upper) in order, at most limit
// times (limit <= 0 means no limit). Key and value are only valid during fn.
// fn returning errStop ends the scan early without error.
func Scan(r Reader, lower, upper []byte, limit int, fn func(key, value []byte) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("scan %q: %w", lower, err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close() // the value error is the one worth returning
			return fmt.Errorf("scan %q: value: %w", lower, err)
		}
		if err := fn(it.Key(), v); err != nil {
			closeErr := it.Close()
			if errors.Is(err, ErrStop) {
				return closeErr
			}
			return err
		}
		n++
		if limit > 0 && n >= limit {
			break
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return fmt.Errorf("scan %q: %w", lower, err)
	}
	return it.Close()
}

// ErrStop ends a Scan early from inside its callback.
var ErrStop = errors.New("stop scan")

// TimeEntry is one (time, id) pair of a time index (l/, w/, e/).
type TimeEntry struct {
	At int64
	ID string
}

func scanTimeIndex(r Reader, prefix []byte, upTo int64, limit int) ([]TimeEntry, error) {
	var out []TimeEntry
	err := Scan(r, prefix, timeIndexUpper(prefix, upTo), limit, func(k, _ []byte) error {
		at, id, err := parseTimeIndexKey(k, len(prefix))
		if err != nil {
			return err
		}
		out = append(out, TimeEntry{At: at, ID: id})
		return nil
	})
	return out, err
}

// ExpiredLeases lists running tasks whose lease_until <= now, oldest first.
// The cost is proportional to the number returned, not to how many run.
func ExpiredLeases(r Reader, now int64, limit int) ([]TimeEntry, error) {
	return scanTimeIndex(r, prefixLease, now, limit)
}

// DueDelayed lists delayed tasks whose visible_at <= now, across queues.
func DueDelayed(r Reader, now int64, limit int) ([]TimeEntry, error) {
	return scanTimeIndex(r, prefixWake, now, limit)
}

// DueDelayedInQueue lists one queue's delayed tasks whose visible_at <= now.
func DueDelayedInQueue(r Reader, queue, tenant string, now int64, limit int) ([]TimeEntry, error) {
	return scanTimeIndex(r, DelayedPrefix(queue, tenant), now, limit)
}

// Expired lists finished tasks whose expire_at <= now.
func Expired(r Reader, now int64, limit int) ([]TimeEntry, error) {
	return scanTimeIndex(r, prefixExpire, now, limit)
}

// RangeScan is one key range for ScanEach, and what to do with each of
// its keys.
type RangeScan struct {
	Lower, Upper []byte
	Fn           func(key, value []byte) error
	// What names the scan in its error, since ScanEach joins the errors
	// of scans that belong to different callers.
	What string
}

// ScanEach scans each range, the ranges side by side, and returns once
// all have ended, with their errors joined. Each Fn is called from one
// goroutine only, so a Fn that touches only its own state needs no lock.
// Open reads the task records and the idempotency keys this way: two
// disjoint ranges, read at once on two cores, take the time of the longer.
func ScanEach(r Reader, scans ...RangeScan) error {
	switch len(scans) {
	case 0:
		return nil
	case 1:
		return scans[0].run(r)
	}
	errs := make([]error, len(scans))
	var wg sync.WaitGroup
	for i, s := range scans {
		wg.Go(func() { errs[i] = s.run(r) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (s RangeScan) run(r Reader) error {
	err := Scan(r, s.Lower, s.Upper, 0, s.Fn)
	if err != nil && s.What != "" {
		return fmt.Errorf("%s: %w", s.What, err)
	}
	return err
}
