package fsm

import (
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Test_HeaderCacheKeeps holds the header cache to what a header read
// would give: a running task's header without its payload, taken once;
// nothing for a task that left running; a whole record's with its
// payload (its header read holds the payload).
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
	d := running("d", 1)
	h.put(d, storage.FormatInline)
	d.Payload = []byte("x") // apply replaces a payload, never writes into it (taskwire.Clone)
	got, format, ok = h.take("d")
	if !ok || format != storage.FormatInline || string(got.GetPayload()) != "p" {
		t.Fatalf("take(d) = %v, %v, %v; want a whole record kept whole, payload included", got, format, ok)
	}
}

// Test_RunningRecordsStayOutOfTheRecordCache: a record the header cache
// answers for is not kept in the record cache as well. The claim evicts
// the pending record an enqueue cached there, and the heartbeat and the
// submit, which took their header from the header cache, write around
// it. Answers, writes and hash are a cacheless replica's throughout.
func Test_RunningRecordsStayOutOfTheRecordCache(t *testing.T) {
	a, b, c := latchedCachePair(t)
	ids := enqueueBoth(t, a, b, "q", 3)
	for _, id := range ids {
		if !c.has(storage.TaskKey(id)) {
			t.Fatalf("a new task behind a short backlog is not cached")
		}
	}
	want, got := a.claim(at(time.Second), "q", "a", 3), b.claim(at(time.Second), "q", "a", 3)
	if len(got) != 3 || len(want) != 3 {
		t.Fatalf("claimed %d and %d tasks, want 3", len(want), len(got))
	}
	cached := func(when string) {
		t.Helper()
		for _, id := range ids {
			if c.has(storage.TaskKey(id)) {
				t.Fatalf("%s: the record cache holds task %s", when, id)
			}
		}
		checkKeyspace(t, b.f)
	}
	cached("after the claim")
	for i, tk := range got {
		if want[i].GetId() != tk.GetId() || want[i].GetFence() != tk.GetFence() {
			t.Fatalf("claimed %s/%d, a cacheless replica %s/%d", tk.GetId(), tk.GetFence(), want[i].GetId(), want[i].GetFence())
		}
		beat := heartbeatCmd(at(2*time.Second), &pb.HeartbeatItem{TaskId: tk.GetId(), Fence: tk.GetFence()})
		a.do(beat)
		b.do(beat)
	}
	cached("after the heartbeats")
	for _, tk := range got {
		done := completeCmd(at(3*time.Second), tk.GetId(), tk.GetFence())
		ra, rb := a.do(done), b.do(done)
		if ca, cb := ra.GetItems()[0].GetCode(), rb.GetItems()[0].GetCode(); ca != pb.Code_CODE_OK || cb != ca {
			t.Fatalf("submit: %v with the cache, %v without", cb, ca)
		}
	}
	cached("after the submits")
	if ha, hb := mustHash(t, a.f), mustHash(t, b.f); ha != hb {
		t.Fatalf("hash %s with the cache, %s without it", hb, ha)
	}
}
