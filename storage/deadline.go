package storage

// prefixDeadline indexes running claims by execution deadline (feature
// level 9): o/<deadline_at>/<id>, so the leader finds the claims past
// their deadline with a range scan up to its now, as it finds expired
// leases under l/.
var prefixDeadline = []byte("o/")

// DeadlineKey is o/<deadline_at>/<id>.
func DeadlineKey(deadlineAt int64, id string) []byte {
	return timeIndexKey(prefixDeadline, deadlineAt, id)
}

// DeadlinePrefix bounds a scan over every execution deadline.
func DeadlinePrefix() []byte { return prefixDeadline }

// PastDeadline lists running claims whose deadline_at <= now, oldest
// first, at most limit.
func PastDeadline(r Reader, now int64, limit int) ([]TimeEntry, error) {
	return scanTimeIndex(r, prefixDeadline, now, limit)
}
