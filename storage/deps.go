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
