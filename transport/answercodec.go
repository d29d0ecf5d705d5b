package transport

import (
	"fmt"
	"slices"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/proto/taskwire"
)

// Claim answers are encoded by hand. A drain's leader sends a hundred
// tasks in each answer, and proto's reflective Size and Marshal of them
// were 5 % of its CPU (BENCHMARKS.md). taskwire writes a task as proto
// does, so the bytes on the wire are proto's (Test_ClaimAnswerCodecIsProtos).

// claimResponseField and claimBatchItemsField are the number of the one
// field of ClaimResponse (tasks) and of ClaimBatchResponse (items).
const (
	claimResponseField   = 1
	claimBatchItemsField = 1
)

// tasksSize is the encoded size of a ClaimResponse holding tasks; it
// appends each task's size to sizes, for appendTasks.
func tasksSize(tasks []*pb.Task, sizes []int) (int, []int) {
	n := 0
	for _, t := range tasks {
		k := taskwire.Size(t)
		sizes = append(sizes, k)
		n += protowire.SizeTag(claimResponseField) + protowire.SizeBytes(k)
	}
	return n, sizes
}

// appendTasks appends the tasks with the sizes tasksSize counted.
func appendTasks(b []byte, tasks []*pb.Task, sizes []int) ([]byte, error) {
	for i, t := range tasks {
		b = protowire.AppendTag(b, claimResponseField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizes[i]))
		var err error
		if b, err = taskwire.Append(b, t); err != nil {
			return nil, fmt.Errorf("encode task %s: %w", t.GetId(), err)
		}
	}
	return b, nil
}

// marshalAnswer encodes the claim answers by hand and says whether v was
// one; any other message is the base codec's, and so is an answer with a
// nil task or item, which the base codec refuses as proto does.
func marshalAnswer(v any) (mem.BufferSlice, bool, error) {
	var size int
	var write func([]byte) ([]byte, error)
	switch m := v.(type) {
	case *pb.ClaimResponse:
		if len(m.ProtoReflect().GetUnknown()) != 0 || slices.Contains(m.Tasks, nil) {
			return nil, false, nil
		}
		var sizes []int
		size, sizes = tasksSize(m.Tasks, nil)
		write = func(b []byte) ([]byte, error) { return appendTasks(b, m.Tasks, sizes) }
	case *pb.ClaimBatchResponse:
		if len(m.ProtoReflect().GetUnknown()) != 0 {
			return nil, false, nil
		}
		items := make([]int, len(m.Items)) // each item's size
		var sizes []int                    // each task's, item after item
		for i, item := range m.Items {
			if item == nil || len(item.ProtoReflect().GetUnknown()) != 0 || slices.Contains(item.Tasks, nil) {
				return nil, false, nil
			}
			items[i], sizes = tasksSize(item.Tasks, sizes)
			size += protowire.SizeTag(claimBatchItemsField) + protowire.SizeBytes(items[i])
		}
		write = func(b []byte) ([]byte, error) {
			rest := sizes
			for i, item := range m.Items {
				b = protowire.AppendTag(b, claimBatchItemsField, protowire.BytesType)
				b = protowire.AppendVarint(b, uint64(items[i]))
				var err error
				if b, err = appendTasks(b, item.Tasks, rest); err != nil {
					return nil, err
				}
				rest = rest[len(item.Tasks):]
			}
			return b, nil
		}
	default:
		return nil, false, nil
	}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := write(make([]byte, 0, size))
		if err == nil && len(b) != size {
			err = fmt.Errorf("encode %T: %d bytes, counted %d", v, len(b), size)
		}
		if err != nil {
			return nil, true, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, true, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	b, err := write((*buf)[:0])
	if err == nil && len(b) != size {
		err = fmt.Errorf("encode %T: %d bytes, counted %d", v, len(b), size)
	}
	if err != nil {
		pool.Put(buf)
		return nil, true, err
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, true, nil
}
