package storage

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/proto/taskwire"
)

// RecordFormat says how a task is laid out on disk.
type RecordFormat uint8

// Task record formats. A record in the split format begins with a zero
// byte, which no protobuf message can begin with (field number 0 is
// invalid), then its format byte; so both formats coexist in one keyspace
// and every reader tells them apart from the first byte.
const (
	// FormatInline: t/<id> holds the whole pb.Task, payload included.
	// Every record written before the split level latched.
	FormatInline RecordFormat = 0
	// FormatSplit: t/<id> holds the task without its payload (the header:
	// state, fence, lease, attempts, result) and v/<id> the payload (the
	// body), written once. A heartbeat rewrites the header only.
	FormatSplit RecordFormat = 1
	// FormatSplitEmpty: the split format of a task whose payload is empty;
	// it has no body key.
	FormatSplitEmpty RecordFormat = 2
)

var prefixBody = []byte("v/")

// BodyKey is v/<id>, the payload of a task in the split format.
func BodyKey(id string) []byte {
	k := make([]byte, 0, len(prefixBody)+len(id))
	return append(append(k, prefixBody...), id...)
}

// GetTask reads a task whole, whichever its format.
func GetTask(r Reader, id string) (*pb.Task, error) {
	t, _, err := GetTaskRecord(r, id)
	return t, err
}

// GetTaskRecord reads a task whole and says which format it is stored in,
// so a writer knows whether its body is on disk already.
func GetTaskRecord(r Reader, id string) (*pb.Task, RecordFormat, error) {
	return getTaskRecord(r, id, true)
}

// GetTaskHeader reads a task without the body of a split record: its
// Payload is empty unless the record is inline. For the rules that change
// a task's state and never answer with it (heartbeat, submit, nack, reap),
// so that a heartbeat neither writes nor reads the payload.
func GetTaskHeader(r Reader, id string) (*pb.Task, RecordFormat, error) {
	return getTaskRecord(r, id, false)
}

func getTaskRecord(r Reader, id string, withBody bool) (*pb.Task, RecordFormat, error) {
	t, format, err := getDecoded(r, TaskKey(id))
	if err != nil {
		return nil, 0, fmt.Errorf("task %s: %w", id, err)
	}
	if format == FormatSplit && withBody {
		body, err := getCopy(r, BodyKey(id))
		if errors.Is(err, ErrNotFound) {
			return nil, 0, fmt.Errorf("task %s: split record without its body: %w", id, err)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("task %s: body: %w", id, err)
		}
		t.Payload = body
	}
	return t, format, nil
}

// getDecoded reads and decodes a t/ value in place: the decoder copies
// every field it keeps, so the value needs no copy of its own.
func getDecoded(r Reader, key []byte) (*pb.Task, RecordFormat, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("get: %w", err)
	}
	t, format, err := DecodeTaskRecord(v)
	if cerr := closer.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("get: close: %w", cerr)
	}
	if err != nil {
		return nil, 0, err
	}
	return t, format, nil
}

// TaskRecordMessage strips a t/ value's format prefix: the encoded Task
// (without its payload when split) and the record's format. For a reader
// that wants a few fields of many records without decoding each whole.
func TaskRecordMessage(v []byte) ([]byte, RecordFormat, error) {
	if len(v) >= 2 && v[0] == 0 {
		format := RecordFormat(v[1])
		if format != FormatSplit && format != FormatSplitEmpty {
			return nil, 0, fmt.Errorf("record format %d unknown to this build", format)
		}
		return v[2:], format, nil
	}
	return v, FormatInline, nil
}

// DecodeTaskRecord decodes a t/ value: the whole task when inline, the
// task without its payload when split (the body is v/'s).
func DecodeTaskRecord(v []byte) (*pb.Task, RecordFormat, error) {
	v, format, err := TaskRecordMessage(v)
	if err != nil {
		return nil, 0, err
	}
	t := &pb.Task{}
	if err := taskwire.Decode(v, t); err != nil {
		return nil, 0, fmt.Errorf("decode: %w", err)
	}
	return t, format, nil
}

// recordBufs are the encoding buffers of task records, reused: a Writer
// keeps no value past its Set.
var recordBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// BodyPrefix bounds a scan over every task body.
func BodyPrefix() []byte { return prefixBody }

// PutTask writes t/<id> in the inline format. It returns t's encoded size,
// taskwire.Size(t), which the encoding has just counted.
func PutTask(w Writer, t *pb.Task) (int, error) {
	buf := recordBufs.Get().(*[]byte)
	defer recordBufs.Put(buf)
	// The key and the value share the buffer: a Writer keeps neither.
	kv := AppendTaskKey((*buf)[:0], t.GetId())
	k := len(kv)
	kv, err := taskwire.Append(kv, t)
	if err != nil {
		return 0, fmt.Errorf("task %s: encode: %w", t.GetId(), err)
	}
	*buf = kv
	return len(kv) - k, w.Set(kv[:k:k], kv[k:], nil)
}

// PutTaskSplit writes t/<id> in the split format, and the body too unless
// bodyStored says v/<id> holds it already (a task's payload never changes
// after enqueue, and t may then be a header read without it). It returns
// the format written and taskwire.Size(t), t's size with its payload.
func PutTaskSplit(w Writer, t *pb.Task, bodyStored bool) (RecordFormat, int, error) {
	payload := t.Payload
	format := FormatSplit
	if len(payload) == 0 && !bodyStored {
		format = FormatSplitEmpty
	}
	// Marshal the header without copying the payload: apply is the task's
	// only user while it runs.
	t.Payload = nil
	buf := recordBufs.Get().(*[]byte)
	defer recordBufs.Put(buf)
	kv := AppendTaskKey((*buf)[:0], t.GetId())
	k := len(kv)
	kv, err := taskwire.Append(append(kv, 0, byte(format)), t)
	t.Payload = payload
	*buf = kv
	if err != nil {
		return 0, 0, fmt.Errorf("task %s: encode: %w", t.GetId(), err)
	}
	v := kv[k:]
	if format == FormatSplit && !bodyStored {
		if err := w.Set(BodyKey(t.GetId()), payload, nil); err != nil {
			return 0, 0, fmt.Errorf("task %s: body: %w", t.GetId(), err)
		}
	}
	if err := w.Set(kv[:k:k], v, nil); err != nil {
		return 0, 0, fmt.Errorf("task %s: %w", t.GetId(), err)
	}
	// A message's size is the sum of its fields' sizes, so the header's
	// encoding and the payload's field give taskwire.Size(t) without a
	// second pass over the fields.
	return format, len(v) - 2 + taskwire.PayloadFieldSize(len(payload)), nil
}

// DeleteTask deletes a task's record, and its body when format has one.
func DeleteTask(w Writer, id string, format RecordFormat) error {
	if format == FormatSplit {
		if err := w.Delete(BodyKey(id), nil); err != nil {
			return fmt.Errorf("task %s: delete body: %w", id, err)
		}
	}
	if err := w.Delete(TaskKey(id), nil); err != nil {
		return fmt.Errorf("task %s: delete: %w", id, err)
	}
	return nil
}
