package storage

import (
	"bytes"
	"errors"
	"fmt"
)

// Task dependencies (fsm's LevelDependencies) keep three kinds of keys:
//
//	q/<queue>/<tenant>/w/<id>   a waiting task (TASK_STATE_WAITING)
//	j/c/<parent>/<child>        child index: a task waiting on parent
//	j/n/<queue>/<tenant>        how many tasks of the queue wait (uint64)
//
// The child index lets a parent's end find its children without a scan of
// anything else; the count lets Stats show waiting tasks without counting
// keys, and is deleted when it reaches 0.
var (
	prefixDeps       = []byte("j/")
	prefixChild      = []byte("j/c/")
	prefixWaitCount  = []byte("j/n/")
	stateWaiting     = byte('w')
	errMalformedDeps = errors.New("malformed dependency key")
)

// DepsPrefix bounds a scan over every dependency key.
func DepsPrefix() []byte { return prefixDeps }

// WaitingPrefix is q/<queue>/<tenant>/w/.
func WaitingPrefix(queue, tenant string) []byte { return statePrefix(queue, tenant, stateWaiting) }

// WaitingKey is q/<queue>/<tenant>/w/<id>.
func WaitingKey(queue, tenant, id string) []byte {
	return append(WaitingPrefix(queue, tenant), id...)
}

// ChildPrefix is j/c/<parent>/: the children waiting on parent.
func ChildPrefix(parent string) []byte {
	k := make([]byte, 0, len(prefixChild)+len(parent)+1+20)
	k = append(append(k, prefixChild...), parent...)
	return append(k, '/')
}

// ChildKey is j/c/<parent>/<child>.
func ChildKey(parent, child string) []byte { return append(ChildPrefix(parent), child...) }

// Children lists the ids of parent's waiting children in key order, up to
// limit (0: all).
func Children(r Reader, parent string, limit int) ([]string, error) {
	prefix := ChildPrefix(parent)
	var ids []string
	err := Scan(r, prefix, PrefixEnd(prefix), limit, func(k, _ []byte) error {
		id, ok := bytes.CutPrefix(k, prefix)
		if !ok || len(id) == 0 {
			return fmt.Errorf("%w: %q", errMalformedDeps, k)
		}
		ids = append(ids, string(id))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("children of %s: %w", parent, err)
	}
	return ids, nil
}

// WaitingCountKey is j/n/<queue>/<tenant>.
func WaitingCountKey(queue, tenant string) []byte {
	k := make([]byte, 0, len(prefixWaitCount)+len(queue)+1+len(tenant))
	k = append(append(k, prefixWaitCount...), queue...)
	return append(append(k, '/'), tenant...)
}

// GetWaitingCount reads how many tasks of a queue wait; 0 when absent.
func GetWaitingCount(r Reader, queue, tenant string) (uint64, error) {
	n, err := GetUint64(r, WaitingCountKey(queue, tenant))
	if err != nil {
		return 0, fmt.Errorf("waiting count %s/%s: %w", queue, tenant, err)
	}
	return n, nil
}

// PutWaitingCount writes the count, or deletes the key at 0 so that a
// queue with nothing waiting leaves no trace.
func PutWaitingCount(w Writer, queue, tenant string, n uint64) error {
	k := WaitingCountKey(queue, tenant)
	if n == 0 {
		return w.Delete(k, nil)
	}
	return SetUint64(w, k, n)
}

// A completed task purged by retention leaves a tombstone, so that a task
// enqueued after it later still counts it as completed, for as long again
// as the task's own retention:
//
//	j/t/<id>               tombstone: expiry (8 bytes) then the tenant
//	j/e/<expire_at>/<id>   the tombstones' expiry index
var (
	prefixTomb       = []byte("j/t/")
	prefixTombExpire = []byte("j/e/")
)

// TombKey is j/t/<id>.
func TombKey(id string) []byte {
	k := make([]byte, 0, len(prefixTomb)+len(id))
	return append(append(k, prefixTomb...), id...)
}

// TombExpireKey is j/e/<expire_at>/<id>.
func TombExpireKey(expireAt int64, id string) []byte {
	return timeIndexKey(prefixTombExpire, expireAt, id)
}

// PutTomb writes the tombstone of a completed task of tenant and its
// expiry index entry.
func PutTomb(w Writer, id, tenant string, expireAt int64) error {
	v := append(PutUint64(nil, TimeKey(expireAt)), tenant...)
	if err := w.Set(TombKey(id), v, nil); err != nil {
		return fmt.Errorf("tombstone %s: %w", id, err)
	}
	return SetIndex(w, TombExpireKey(expireAt, id))
}

// GetTomb reads the tenant of a completed task's tombstone; ok is false
// when there is none.
func GetTomb(r Reader, id string) (tenant string, ok bool, err error) {
	v, err := getCopy(r, TombKey(id))
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("tombstone %s: %w", id, err)
	}
	if len(v) < 8 {
		return "", false, fmt.Errorf("tombstone %s: %w", id, errMalformedDeps)
	}
	return string(v[8:]), true, nil
}

// ExpiredTombs lists tombstones whose time ended at or before now, oldest
// first, up to limit.
func ExpiredTombs(r Reader, now int64, limit int) ([]TimeEntry, error) {
	return scanTimeIndex(r, prefixTombExpire, now, limit)
}

// DeleteTomb deletes a tombstone and its expiry index entry.
func DeleteTomb(w Writer, e TimeEntry) error {
	if err := w.Delete(TombKey(e.ID), nil); err != nil {
		return fmt.Errorf("tombstone %s: %w", e.ID, err)
	}
	return w.Delete(TombExpireKey(e.At, e.ID), nil)
}
