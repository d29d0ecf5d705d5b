package storage

import (
	"encoding/binary"
	"errors"
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Priorities is the number of priority levels (0..9).
const Priorities = 10

// QueueMeta is the catalog record c/<queue>/<tenant>: counters by state and
// the head hint of each priority's pending range.
type QueueMeta struct {
	Pending, Delayed, Running, Dead, Finished uint64
	// Head[p] is a lower bound of the pending seqs at priority p: every
	// pending key of that priority has seq >= Head[p]. Drained says the
	// priority has no pending key at all.
	Head [Priorities]uint64
}

// Drained is the head hint of a priority with no pending task: no seq is
// at or above it. A claim that empties a priority sets it, so later claims
// skip that priority without a seek; a task that becomes pending there
// lowers the hint to its own seq.
const Drained = ^uint64(0)

// metaVersion1 is 5 counters and 10 heads, 8 bytes each, after a version byte.
const (
	metaVersion1 = 1
	metaLenV1    = 1 + 8*(5+Priorities)
)

// Marshal encodes m in its fixed binary form.
func (m *QueueMeta) Marshal() []byte {
	b := make([]byte, 0, metaLenV1)
	b = append(b, metaVersion1)
	for _, v := range []uint64{m.Pending, m.Delayed, m.Running, m.Dead, m.Finished} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	for _, h := range m.Head {
		b = binary.BigEndian.AppendUint64(b, h)
	}
	return b
}

// UnmarshalQueueMeta decodes a catalog value.
func UnmarshalQueueMeta(b []byte) (QueueMeta, error) {
	var m QueueMeta
	if len(b) < metaLenV1 || b[0] != metaVersion1 {
		return m, fmt.Errorf("queue meta: %d bytes, version %v", len(b), b[:min(1, len(b))])
	}
	b = b[1:]
	for _, p := range []*uint64{&m.Pending, &m.Delayed, &m.Running, &m.Dead, &m.Finished} {
		*p = binary.BigEndian.Uint64(b)
		b = b[8:]
	}
	for i := range m.Head {
		m.Head[i] = binary.BigEndian.Uint64(b)
		b = b[8:]
	}
	return m, nil
}

// GetQueueMeta reads c/<queue>/<tenant>; a missing queue reads as zero.
func GetQueueMeta(r Reader, queue, tenant string) (QueueMeta, error) {
	v, err := getCopy(r, CatalogKey(queue, tenant))
	if errors.Is(err, ErrNotFound) {
		return QueueMeta{}, nil
	}
	if err != nil {
		return QueueMeta{}, err
	}
	return UnmarshalQueueMeta(v)
}

// PutQueueMeta writes c/<queue>/<tenant>.
func PutQueueMeta(w Writer, queue, tenant string, m *QueueMeta) error {
	return w.Set(CatalogKey(queue, tenant), m.Marshal(), nil)
}

// Count adjusts the counter of state by delta (+1 or -1). Terminal states
// share the Finished counter.
func (m *QueueMeta) Count(state pb.TaskState, delta int) {
	var c *uint64
	switch state {
	case pb.TaskState_TASK_STATE_PENDING:
		c = &m.Pending
	case pb.TaskState_TASK_STATE_DELAYED:
		c = &m.Delayed
	case pb.TaskState_TASK_STATE_RUNNING:
		c = &m.Running
	case pb.TaskState_TASK_STATE_DEAD:
		c = &m.Dead
	case pb.TaskState_TASK_STATE_COMPLETED, pb.TaskState_TASK_STATE_FAILED, pb.TaskState_TASK_STATE_CANCELLED:
		c = &m.Finished
	default:
		return
	}
	if delta < 0 && *c == 0 {
		return // never wrap; a mismatch is caught by the consistency test
	}
	*c = uint64(int64(*c) + int64(delta))
}
