package taskwire

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_CloneKnowsEveryField fails when task.proto gains a field Clone
// does not copy: fullTask sets every field (Test_TaskCodecKnowsEveryField
// holds it to that).
func Test_CloneKnowsEveryField(t *testing.T) {
	task := fullTask()
	if c := Clone(task); !proto.Equal(c, task) {
		t.Fatalf("Clone lost a field:\n got %v\nwant %v", c, task)
	}
	r := rand.New(rand.NewPCG(20261130, 2))
	for i := 0; i < 2000; i++ {
		task := randomTask(r)
		if c := Clone(task); !proto.Equal(c, task) {
			t.Fatalf("Clone of %v is %v", task, c)
		}
	}
	odd := fullTask()
	odd.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 5))
	if c := Clone(odd); !proto.Equal(c, odd) {
		t.Fatalf("Clone dropped an unknown field: %v", c)
	}
}

// Test_CloneIsIndependent changes a clone the ways apply changes a task:
// fields set, an attempt closed in place, the history appended to and
// shifted, bytes appended to. The original must not move.
func Test_CloneIsIndependent(t *testing.T) {
	task := fullTask()
	want := proto.Clone(task)
	c := Clone(task)
	c.State, c.WorkerId, c.Fence = pb.TaskState_TASK_STATE_COMPLETED, "other", 99
	c.History[0].Outcome, c.History[0].Error = pb.AttemptOutcome_ATTEMPT_OUTCOME_TIMED_OUT, "changed"
	c.History = append(c.History, &pb.Attempt{Claim: 2})
	c.History = append(c.History[:0], c.History[1:]...)
	c.Retry.BaseNs = 1 << 40
	c.Payload = append(c.Payload, 'x')
	c.Progress = append(c.Progress, 'x')
	c.Result = append(c.Result, 'x')
	c.Key = append(c.Key, 'x')
	c.Parents = append(c.Parents, "x")
	if !proto.Equal(task, want) {
		t.Fatalf("changing the clone changed the original:\n got %v\nwant %v", task, want)
	}
}
