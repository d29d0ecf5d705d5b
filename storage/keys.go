package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Key prefixes. Each is one byte and a slash so that a scan over one index
// never touches another.
var (
	prefixTask    = []byte("t/")
	prefixQueue   = []byte("q/")
	prefixWake    = []byte("w/")
	prefixLease   = []byte("l/")
	prefixExpire  = []byte("e/")
	prefixIdem    = []byte("i/")
	prefixCatalog = []byte("c/")

	// KeyApplied holds the last applied Raft index, written in the same
	// batch as the mutations of that entry.
	KeyApplied = []byte("m/applied")
	// KeyNow holds the last applied leader time, so time never runs backwards.
	KeyNow = []byte("m/now")
	// KeyFeature holds the feature level the cluster latched (fsm's
	// SetFeatureLevel); absent reads as 0, before any latch.
	KeyFeature = []byte("m/feature")
	// KeyClusterID holds the cluster's id (fsm's SetClusterID); absent
	// until the first leader at feature level 14 proposes one.
	KeyClusterID = []byte("m/cluster-id")
)

// Index state letters inside q/<queue>/<tenant>/.
const (
	statePending = 'p'
	stateDelayed = 'd'
	stateRunning = 'r'
	stateDead    = 'x'
)

// PutUint64 appends v big-endian; byte order then equals numeric order.
func PutUint64(b []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(b, v)
}

// TimeKey maps a Unix-nanosecond time to its sortable unsigned form.
// Negative times (never stamped by a leader) clamp to zero.
func TimeKey(t int64) uint64 {
	if t < 0 {
		return 0
	}
	return uint64(t)
}

// TaskKey is t/<id>.
func TaskKey(id string) []byte {
	return AppendTaskKey(make([]byte, 0, len(prefixTask)+len(id)), id)
}

// AppendTaskKey appends t/<id> to dst: apply builds the keys it only
// hands to a Writer, which keeps none, in buffers it reuses.
func AppendTaskKey(dst []byte, id string) []byte {
	return append(append(dst, prefixTask...), id...)
}

// TaskPrefix bounds a scan over every task record.
func TaskPrefix() []byte { return prefixTask }

// QueuePrefix is q/<queue>/<tenant>/.
func QueuePrefix(queue, tenant string) []byte {
	k := make([]byte, 0, len(prefixQueue)+len(queue)+len(tenant)+2+24)
	k = append(k, prefixQueue...)
	k = append(k, queue...)
	k = append(k, '/')
	k = append(k, tenant...)
	return append(k, '/')
}

func statePrefix(queue, tenant string, state byte) []byte {
	return append(QueuePrefix(queue, tenant), state, '/')
}

// PendingPrefix is q/<queue>/<tenant>/p/.
func PendingPrefix(queue, tenant string) []byte { return statePrefix(queue, tenant, statePending) }

// PendingPrioPrefix is q/<queue>/<tenant>/p/<255-prio>/.
func PendingPrioPrefix(queue, tenant string, prio uint32) []byte {
	return append(PendingPrefix(queue, tenant), byte(255-prio), '/')
}

// PendingSeek is the first key of priority prio at or after seq.
func PendingSeek(queue, tenant string, prio uint32, seq uint64) []byte {
	return PutUint64(PendingPrioPrefix(queue, tenant, prio), seq)
}

// PendingKey is q/<queue>/<tenant>/p/<255-prio>/<seq>/<id>.
func PendingKey(queue, tenant string, prio uint32, seq uint64, id string) []byte {
	k := PendingSeek(queue, tenant, prio, seq)
	k = append(k, '/')
	return append(k, id...)
}

// ParsePendingKey returns the seq and id of a key that starts with
// PendingPrioPrefix(queue, tenant, prio); prefixLen is that prefix's length.
func ParsePendingKey(key []byte, prefixLen int) (seq uint64, id string, err error) {
	if len(key) < prefixLen+9 || key[prefixLen+8] != '/' {
		return 0, "", fmt.Errorf("pending key %q: malformed", key)
	}
	return binary.BigEndian.Uint64(key[prefixLen:]), string(key[prefixLen+9:]), nil
}

// DelayedPrefix is q/<queue>/<tenant>/d/.
func DelayedPrefix(queue, tenant string) []byte { return statePrefix(queue, tenant, stateDelayed) }

// DelayedKey is q/<queue>/<tenant>/d/<visible_at>/<id>.
func DelayedKey(queue, tenant string, visibleAt int64, id string) []byte {
	k := PutUint64(DelayedPrefix(queue, tenant), TimeKey(visibleAt))
	return append(append(k, '/'), id...)
}

// RunningPrefix is q/<queue>/<tenant>/r/.
func RunningPrefix(queue, tenant string) []byte { return statePrefix(queue, tenant, stateRunning) }

// RunningKey is q/<queue>/<tenant>/r/<id>.
func RunningKey(queue, tenant, id string) []byte {
	return append(RunningPrefix(queue, tenant), id...)
}

// DeadPrefix is q/<queue>/<tenant>/x/.
func DeadPrefix(queue, tenant string) []byte { return statePrefix(queue, tenant, stateDead) }

// DeadKey is q/<queue>/<tenant>/x/<id>.
func DeadKey(queue, tenant, id string) []byte {
	return append(DeadPrefix(queue, tenant), id...)
}

func timeIndexKey(prefix []byte, t int64, id string) []byte {
	k := make([]byte, 0, len(prefix)+9+len(id))
	k = PutUint64(append(k, prefix...), TimeKey(t))
	return append(append(k, '/'), id...)
}

// timeIndexUpper is the exclusive upper bound of entries with time <= t.
func timeIndexUpper(prefix []byte, t int64) []byte {
	k := make([]byte, 0, len(prefix)+8)
	// Every key with time t is prefix+be(t)+"/"+id, which sorts below
	// prefix+be(t+1); clamp at the top so the bound stays inside the prefix.
	next := TimeKey(t)
	if next == ^uint64(0) {
		return PrefixEnd(prefix)
	}
	return PutUint64(append(k, prefix...), next+1)
}

// parseTimeIndexKey splits prefix+be(t)+"/"+id.
func parseTimeIndexKey(key []byte, prefixLen int) (int64, string, error) {
	if len(key) < prefixLen+9 || key[prefixLen+8] != '/' {
		return 0, "", fmt.Errorf("time index key %q: malformed", key)
	}
	return int64(binary.BigEndian.Uint64(key[prefixLen:])), string(key[prefixLen+9:]), nil
}

// LeasePrefix bounds a scan over every lease end.
func LeasePrefix() []byte { return prefixLease }

// LeaseKey is l/<lease_until>/<id>.
func LeaseKey(leaseUntil int64, id string) []byte { return timeIndexKey(prefixLease, leaseUntil, id) }

// WakePrefix bounds a scan over every delayed task's wake time.
func WakePrefix() []byte { return prefixWake }

// WakeKey is w/<visible_at>/<id>.
func WakeKey(visibleAt int64, id string) []byte { return timeIndexKey(prefixWake, visibleAt, id) }

// ExpirePrefix bounds a scan over every expiry key.
func ExpirePrefix() []byte { return prefixExpire }

// ExpireKey is e/<expire_at>/<id>.
func ExpireKey(expireAt int64, id string) []byte { return timeIndexKey(prefixExpire, expireAt, id) }

// IdemPrefix bounds a scan over every idempotency key.
func IdemPrefix() []byte { return prefixIdem }

// IdemKey is i/<queue>/<tenant>/<key>.
func IdemKey(queue, tenant, key string) []byte {
	return AppendIdemKey(make([]byte, 0, len(prefixIdem)+len(queue)+len(tenant)+len(key)+2), queue, tenant, key)
}

// AppendIdemKey appends IdemKey(queue, tenant, key) to k: a rebuild reads
// the three from a record's bytes and reuses one buffer.
func AppendIdemKey[S string | []byte](k []byte, queue, tenant, key S) []byte {
	k = append(k, prefixIdem...)
	k = append(k, queue...)
	k = append(k, '/')
	k = append(k, tenant...)
	k = append(k, '/')
	return append(k, key...)
}

// CatalogKey is c/<queue>/<tenant>.
func CatalogKey(queue, tenant string) []byte {
	k := make([]byte, 0, len(prefixCatalog)+len(queue)+len(tenant)+1)
	k = append(k, prefixCatalog...)
	k = append(k, queue...)
	k = append(k, '/')
	return append(k, tenant...)
}

// ParseCatalogKey splits c/<queue>/<tenant>.
func ParseCatalogKey(key []byte) (queue, tenant string, err error) {
	rest, ok := bytes.CutPrefix(key, prefixCatalog)
	if !ok {
		return "", "", fmt.Errorf("catalog key %q: wrong prefix", key)
	}
	q, t, ok := bytes.Cut(rest, []byte{'/'})
	if !ok {
		return "", "", fmt.Errorf("catalog key %q: no tenant", key)
	}
	return string(q), string(t), nil
}

// CatalogPrefix bounds a scan over the catalog; with a queue it bounds that
// queue's tenants.
func CatalogPrefix(queue string) []byte {
	if queue == "" {
		return prefixCatalog
	}
	return append(append(append([]byte{}, prefixCatalog...), queue...), '/')
}

// PrefixEnd is the smallest key greater than every key with prefix p.
func PrefixEnd(p []byte) []byte {
	end := append([]byte{}, p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}
