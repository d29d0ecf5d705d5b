package fsm

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// orderHeader is what the ready order takes from a task record: the
// fields of pb.Task that place it, read in place from the record's bytes.
// Open reads every record of a backlog, and decoding each whole (its
// strings, its history, a message to allocate) was half of a 1M-task
// rebuild's time; the order needs seven fields, none of them copied.
type orderHeader struct {
	id, queue, tenant []byte
	priority          uint32
	state             pb.TaskState
	visibleAt         int64
	seq               uint64
	// A running task's lease end and execution deadline (running.go).
	leaseUntil, deadlineAt int64
	// idemKey is the task's idempotency key (idem.go), of any state.
	idemKey []byte
	// expireAt is a finished task's or a dead letter's purge time
	// (expiry.go).
	expireAt int64
}

// The field numbers of pb.Task the header reads (task.proto).
const (
	fieldTaskID        = 1
	fieldTaskQueue     = 2
	fieldTaskTenant    = 3
	fieldTaskPriority  = 5
	fieldTaskState     = 6
	fieldTaskIdemKey   = 9
	fieldTaskVisibleAt = 12
	fieldTaskSeq       = 13
	fieldTaskLease     = 17
	fieldTaskExpireAt  = 24
	fieldTaskDeadline  = 112
)

// decodeOrderHeader reads h from a t/ value, as proto.Unmarshal would set
// those fields: the last occurrence wins, and a field of an unexpected
// wire type is skipped as unknown. The slices alias v.
func decodeOrderHeader(v []byte, h *orderHeader) error {
	v, _, err := storage.TaskRecordMessage(v)
	if err != nil {
		return err
	}
	*h = orderHeader{}
	for len(v) > 0 {
		num, typ, n := protowire.ConsumeTag(v)
		if n < 0 {
			return protowire.ParseError(n)
		}
		v = v[n:]
		switch {
		case typ == protowire.BytesType && (num == fieldTaskID || num == fieldTaskQueue || num == fieldTaskTenant || num == fieldTaskIdemKey):
			var b []byte
			b, n = protowire.ConsumeBytes(v)
			switch num {
			case fieldTaskID:
				h.id = b
			case fieldTaskQueue:
				h.queue = b
			case fieldTaskIdemKey:
				h.idemKey = b
			default:
				h.tenant = b
			}
		case typ == protowire.VarintType && (num == fieldTaskPriority || num == fieldTaskState || num == fieldTaskVisibleAt ||
			num == fieldTaskSeq || num == fieldTaskLease || num == fieldTaskDeadline || num == fieldTaskExpireAt):
			var x uint64
			x, n = protowire.ConsumeVarint(v)
			switch num {
			case fieldTaskPriority:
				h.priority = uint32(x)
			case fieldTaskState:
				h.state = pb.TaskState(int32(x))
			case fieldTaskVisibleAt:
				h.visibleAt = int64(x)
			case fieldTaskLease:
				h.leaseUntil = int64(x)
			case fieldTaskDeadline:
				h.deadlineAt = int64(x)
			case fieldTaskExpireAt:
				h.expireAt = int64(x)
			default:
				h.seq = x
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, v)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		v = v[n:]
	}
	return nil
}

// recordScan is the scan of the task records that adds every pending,
// delayed, running, finished and expiring dead task to o, and every task's
// idempotency key to its index, reading each record's header in place. Records come in id order,
// and a backlog's tasks mostly share a queue, so the queue's name is made
// a string once per run of records, not once per record. A hash shared by
// two keys is told apart by reading the earlier task's record from r.
func (o *readyOrder) recordScan(r storage.Reader) storage.RangeScan {
	var (
		h                   orderHeader
		ref                 QueueRef
		lastQueue, lastTent []byte
		started             bool
		ik                  []byte
	)
	owns := recordOwner(r)
	add := func(k, v []byte) error {
		if err := decodeOrderHeader(v, &h); err != nil {
			// Bytes apply never wrote, though Pebble's checksums
			// hold: the repair is a damaged keyspace's.
			return fmt.Errorf("%w: task %q: %v", storage.ErrUndecodable, k, err)
		}
		if len(h.idemKey) > 0 {
			id, ok := packID(h.id)
			if !ok {
				return fmt.Errorf("task id %q does not pack", h.id)
			}
			ik = storage.AppendIdemKey(ik[:0], h.queue, h.tenant, h.idemKey)
			if err := o.idem.set(ik, id, owns); err != nil {
				return err
			}
		}
		if at, ok := expiryOf(h.state, h.expireAt); ok {
			id, ok := packID(h.id)
			if !ok {
				return fmt.Errorf("task id %q does not pack", h.id)
			}
			o.expiry.ReplaceOrInsert(orderItem{timeAt(at), id})
			return nil
		}
		if h.state != pb.TaskState_TASK_STATE_PENDING && h.state != pb.TaskState_TASK_STATE_DELAYED &&
			h.state != pb.TaskState_TASK_STATE_RUNNING {
			return nil
		}
		if h.priority > MaxPriority {
			return fmt.Errorf("%w: task %q: priority %d", storage.ErrUndecodable, k, h.priority)
		}
		if !started || !bytes.Equal(h.queue, lastQueue) || !bytes.Equal(h.tenant, lastTent) {
			ref = QueueRef{string(h.queue), string(h.tenant)}
			lastQueue, lastTent = append(lastQueue[:0], h.queue...), append(lastTent[:0], h.tenant...)
			started = true
		}
		if h.state == pb.TaskState_TASK_STATE_RUNNING {
			id, ok := packID(h.id)
			if !ok {
				return fmt.Errorf("task id %q does not pack", h.id)
			}
			o.running.add(runningAt{ref, id, h.leaseUntil, h.deadlineAt})
			return nil
		}
		it, ok := itemAt(h.id, h.state, h.visibleAt, h.seq)
		if !ok {
			return fmt.Errorf("task id %q does not pack", h.id)
		}
		insert(o.treeAt(ref, h.state, h.priority, true), it)
		if h.state == pb.TaskState_TASK_STATE_DELAYED {
			o.wakes.ReplaceOrInsert(wakeAt(h.visibleAt, it.id))
		}
		return nil
	}
	return storage.RangeScan{What: "ready order: scan t/", Lower: storage.TaskPrefix(), Upper: storage.PrefixEnd(storage.TaskPrefix()), Fn: add}
}
