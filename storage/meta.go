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
	// Totals are the queue's lifetime transition counts. nil in a record
	// written before the cluster latched fsm.LevelCounters (version 1):
	// until then apply writes exactly what older builds write.
	Totals *QueueTotals
}

// QueueTotals count transitions since the queue's record got totals:
// replicated state, the same on every node at the same index.
type QueueTotals struct {
	Enqueued     uint64 // tasks accepted by Enqueue
	Claimed      uint64 // pending tasks handed out by Claim
	Completed    uint64 // Submits with OUTCOME_COMPLETED
	Failed       uint64 // Submits with OUTCOME_FAILED
	Cancelled    uint64 // tasks Cancel ended
	DeadLettered uint64 // tasks moved to the dead letters
	Requeued     uint64 // tasks back to pending or delayed from running (nack, expired lease, release) or dead (requeue)
	Expired      uint64 // running tasks whose lease expired (Reap), requeued or dead-lettered
	Released     uint64 // running tasks put back because their claim's answer was lost (Release)
	// HasReleased makes the record version 3, which keeps Released: set
	// from fsm.LevelAttempts on. Until then the record stays version 2,
	// byte for byte what older builds write.
	HasReleased bool
}

func (t *QueueTotals) fields() []*uint64 {
	f := []*uint64{&t.Enqueued, &t.Claimed, &t.Completed, &t.Failed, &t.Cancelled, &t.DeadLettered, &t.Requeued, &t.Expired}
	if t.HasReleased {
		f = append(f, &t.Released)
	}
	return f
}

// Drained is the head hint of a priority with no pending task: no seq is
// at or above it. A claim that empties a priority sets it, so later claims
// skip that priority without a seek; a task that becomes pending there
// lowers the hint to its own seq.
const Drained = ^uint64(0)

// metaVersion1 is 5 counters and 10 heads, 8 bytes each, after a version
// byte; version 2 appends the 8 totals, version 3 a 9th (Released).
const (
	metaVersion1 = 1
	metaLenV1    = 1 + 8*(5+Priorities)
	metaVersion2 = 2
	metaLenV2    = metaLenV1 + 8*8
	metaVersion3 = 3
	metaLenV3    = metaLenV2 + 8
)

// Marshal encodes m in its fixed binary form: version 2 when it has
// totals, else version 1.
func (m *QueueMeta) Marshal() []byte {
	b := make([]byte, 0, metaLenV3)
	switch {
	case m.Totals != nil && m.Totals.HasReleased:
		b = append(b, metaVersion3)
	case m.Totals != nil:
		b = append(b, metaVersion2)
	default:
		b = append(b, metaVersion1)
	}
	for _, v := range []uint64{m.Pending, m.Delayed, m.Running, m.Dead, m.Finished} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	for _, h := range m.Head {
		b = binary.BigEndian.AppendUint64(b, h)
	}
	if m.Totals != nil {
		for _, p := range m.Totals.fields() {
			b = binary.BigEndian.AppendUint64(b, *p)
		}
	}
	return b
}

// UnmarshalQueueMeta decodes a catalog value of either version.
func UnmarshalQueueMeta(b []byte) (QueueMeta, error) {
	var m QueueMeta
	ok := len(b) > 0 && (b[0] == metaVersion1 && len(b) == metaLenV1 || b[0] == metaVersion2 && len(b) == metaLenV2 ||
		b[0] == metaVersion3 && len(b) == metaLenV3)
	if !ok {
		return m, fmt.Errorf("queue meta: %d bytes, version %v", len(b), b[:min(1, len(b))])
	}
	v2, v3 := b[0] == metaVersion2, b[0] == metaVersion3
	b = b[1:]
	for _, p := range []*uint64{&m.Pending, &m.Delayed, &m.Running, &m.Dead, &m.Finished} {
		*p = binary.BigEndian.Uint64(b)
		b = b[8:]
	}
	for i := range m.Head {
		m.Head[i] = binary.BigEndian.Uint64(b)
		b = b[8:]
	}
	if v2 || v3 {
		m.Totals = &QueueTotals{HasReleased: v3}
		for _, p := range m.Totals.fields() {
			*p = binary.BigEndian.Uint64(b)
			b = b[8:]
		}
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
