package fsm

import (
	"testing"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Test_HeaderCacheKeeps holds the header cache to what a header read
// would give: a running task's header without its payload, taken once;
// nothing for a task that left running, or whose record is inline (its
// header read holds the payload).
func Test_HeaderCacheKeeps(t *testing.T) {
	var h headerCache
	h.clear()
	running := func(id string, fence uint64) *pb.Task {
		return &pb.Task{Id: id, State: pb.TaskState_TASK_STATE_RUNNING, Fence: fence, Payload: []byte("p")}
	}
	w := running("a", 1)
	h.put(w, storage.FormatSplit)
	w.Fence = 7 // the writer goes on changing its task
	got, format, ok := h.take("a")
	if !ok || got.GetFence() != 1 || got.GetPayload() != nil || format != storage.FormatSplit {
		t.Fatalf("take(a) = %v, %v, %v; want the header as written, without its payload", got, format, ok)
	}
	if string(w.GetPayload()) != "p" {
		t.Fatal("put took the writer's payload away")
	}
	if got, _, ok := h.take("a"); ok {
		t.Fatalf("take(a) again = %v: a read takes the entry", got)
	}
	h.put(running("b", 1), storage.FormatSplit)
	h.put(&pb.Task{Id: "b", State: pb.TaskState_TASK_STATE_COMPLETED}, storage.FormatSplit)
	if got, _, ok := h.take("b"); ok {
		t.Fatalf("a finished task's write left its running header behind: %v", got)
	}
	h.put(running("c", 1), storage.FormatSplit)
	h.forget("c")
	if _, _, ok := h.take("c"); ok {
		t.Fatal("a deleted task's header was kept")
	}
	h.put(running("d", 1), storage.FormatInline)
	if _, _, ok := h.take("d"); ok {
		t.Fatal("an inline record's header was kept: its header read holds the payload")
	}
}
