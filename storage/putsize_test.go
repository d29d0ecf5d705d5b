package storage

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/proto/taskwire"
)

// Test_PutTaskCountsSize holds the size PutTask and PutTaskSplit return
// to taskwire.Size: apply counts it against the tenant's bytes, which are
// replicated state, so a replica that counted it the other way would
// diverge. Cases cover an empty payload, a header read without its body,
// history, and a newer build's unknown field (proto's own encoder then).
func Test_PutTaskCountsSize(t *testing.T) {
	unknown := &pb.Task{Id: "u", Queue: "q", Payload: []byte("body")}
	unknown.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 5))
	cases := map[string]struct {
		task       *pb.Task
		bodyStored bool
	}{
		"plain":                 {task: &pb.Task{Id: "a", Queue: "q", Tenant: "t", Payload: make([]byte, 128), Seq: 1 << 40}},
		"empty payload":         {task: &pb.Task{Id: "b", Queue: "q", State: pb.TaskState_TASK_STATE_PENDING}},
		"large payload":         {task: &pb.Task{Id: "c", Queue: "q", Payload: make([]byte, 1<<20)}},
		"header, body stored":   {task: &pb.Task{Id: "d", Queue: "q", WorkerId: "w", Fence: 9}, bodyStored: true},
		"payload, body stored":  {task: &pb.Task{Id: "e", Queue: "q", Payload: []byte("p")}, bodyStored: true},
		"history and a key":     {task: &pb.Task{Id: "f", Queue: "q", Key: []byte("k"), History: []*pb.Attempt{{Claim: 1, WorkerId: "w", Error: "boom"}}}},
		"unknown field":         {task: unknown},
		"unknown, body stored":  {task: unknown, bodyStored: true},
		"parents and retry":     {task: &pb.Task{Id: "g", Parents: []string{"x", ""}, Retry: &pb.RetryPolicy{BaseNs: 1}}},
		"negative enum and int": {task: &pb.Task{Id: "h", LeaseUntil: -1, OnParentFailure: pb.ParentFailurePolicy(-2)}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			b := new(pebble.Batch)
			want := taskwire.Size(c.task)
			_, got, err := PutTaskSplit(b, c.task, c.bodyStored)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("PutTaskSplit counted %d bytes, taskwire.Size %d", got, want)
			}
			inline, err := PutTask(b, c.task)
			if err != nil {
				t.Fatal(err)
			}
			if inline != want {
				t.Errorf("PutTask counted %d bytes, taskwire.Size %d", inline, want)
			}
			if sz := taskwire.Size(c.task); sz != want {
				t.Errorf("the put changed the task: size %d, was %d", sz, want)
			}
		})
	}
}

// discard is a Writer that keeps nothing, as the contract allows.
type discard struct{ sets int }

func (d *discard) Set(_, _ []byte, _ *pebble.WriteOptions) error { d.sets++; return nil }
func (d *discard) Delete(_ []byte, _ *pebble.WriteOptions) error { return nil }

// Test_PutTaskAllocatesNothing: a task record's key is built in the
// buffer its value is encoded into, not allocated at every write (a
// claim and a submit each write the record, and the key was a tenth of
// a drained task's allocations).
func Test_PutTaskAllocatesNothing(t *testing.T) {
	task := &pb.Task{Id: "0000000000000a2b0001", Queue: "q", Tenant: "t", Payload: make([]byte, 128), Seq: 1 << 40}
	d := &discard{}
	if n := testing.AllocsPerRun(100, func() { _, _ = PutTask(d, task) }); n != 0 {
		t.Errorf("PutTask allocated %v times a call", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = PutTaskSplit(d, task, true) }); n != 0 {
		t.Errorf("PutTaskSplit allocated %v times a call", n)
	}
	if d.sets == 0 {
		t.Fatal("nothing was written")
	}
}

// Test_PutTaskEncodeErrorIsReturned: a record that cannot be encoded (a
// string that is not UTF-8, in a task the generic encoder writes) is an
// error of the put, not a panic, whichever format it is written in.
func Test_PutTaskEncodeErrorIsReturned(t *testing.T) {
	bad := &pb.Task{Id: "x", Queue: "\xff"}
	bad.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 5))
	if _, err := PutTask(&discard{}, bad); err == nil {
		t.Error("PutTask encoded a queue name that is not UTF-8")
	}
	if _, _, err := PutTaskSplit(&discard{}, bad, true); err == nil {
		t.Error("PutTaskSplit encoded a queue name that is not UTF-8")
	}
}
