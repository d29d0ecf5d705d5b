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
	h.put(w, storage.FormatSplit, 0)
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
	h.put(running("b", 1), storage.FormatSplit, 0)
	h.put(&pb.Task{Id: "b", State: pb.TaskState_TASK_STATE_COMPLETED}, storage.FormatSplit, 0)
	if got, _, ok := h.take("b"); ok {
		t.Fatalf("a finished task's write left its running header behind: %v", got)
	}
	h.put(running("c", 1), storage.FormatSplit, 0)
	h.forget("c")
	if _, _, ok := h.take("c"); ok {
		t.Fatal("a deleted task's header was kept")
	}
	d := running("d", 1)
	h.put(d, storage.FormatInline, 0)
	d.Payload = []byte("x") // apply replaces a payload, never writes into it (taskwire.Clone)
	got, format, ok = h.take("d")
	if !ok || format != storage.FormatInline || string(got.GetPayload()) != "p" {
		t.Fatalf("take(d) = %v, %v, %v; want a whole record kept whole, payload included", got, format, ok)
	}
	// A finished task is kept whole, and only while its retention ends
	// within shortRetention of the write.
	now := int64(time.Hour)
	for _, c := range []struct {
		expire int64
		format storage.RecordFormat
		kept   bool
	}{
		{now + 1, storage.FormatInline, true},
		{now + shortRetention, storage.FormatInline, true},
		{now + shortRetention + 1, storage.FormatInline, false},
		{now + 1, storage.FormatSplit, false},
		{0, storage.FormatInline, false}, // a finished task without an expiry
	} {
		h.put(&pb.Task{Id: "e", State: pb.TaskState_TASK_STATE_COMPLETED, ExpireAt: c.expire, Payload: []byte("p")}, c.format, now)
		got, _, ok := h.take("e")
		if ok != c.kept || (ok && string(got.GetPayload()) != "p") {
			t.Fatalf("a finished task expiring at now%+d, %v: kept %v (%v), want %v", c.expire-now, c.format, ok, got, c.kept)
		}
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

// Test_PurgeTakesShortLivedTasksFromTheHeaderCache: a task whose
// retention ends within seconds of its end keeps its whole record in the
// header cache, so the purge that removes it reads nothing from Pebble.
// In a drain whose tasks keep nothing (retention 1 ns), the purge's
// reads of records that had left the memtable were 15 % of the three
// nodes' CPU (BENCHMARKS.md). Answers, keyspace and hash stay a cacheless
// replica's.
func Test_PurgeTakesShortLivedTasksFromTheHeaderCache(t *testing.T) {
	a, b, c := latchedCachePair(t)
	var ids []string
	for range 3 {
		task := nt("q", "a", 0)
		task.RetentionNs = 1
		id := a.enqueue(at(0), task)[0]
		if got := b.enqueue(at(0), task)[0]; got != id {
			t.Fatalf("ids %s and %s", id, got)
		}
		ids = append(ids, id)
	}
	want, got := a.claim(at(time.Second), "q", "a", 3), b.claim(at(time.Second), "q", "a", 3)
	if len(got) != 3 || len(want) != 3 {
		t.Fatalf("claimed %d and %d tasks, want 3", len(want), len(got))
	}
	for _, tk := range got {
		done := completeCmd(at(2*time.Second), tk.GetId(), tk.GetFence())
		a.do(done)
		b.do(done)
	}
	hits, misses := c.headers.stats.hits, c.headers.stats.misses
	purge := purgeCmd(at(3*time.Second), 10)
	ra, rb := a.do(purge), b.do(purge)
	if len(ra.GetItems()) != 3 || len(rb.GetItems()) != 3 {
		t.Fatalf("purged %d and %d tasks, want 3", len(ra.GetItems()), len(rb.GetItems()))
	}
	if h, m := c.headers.stats.hits-hits, c.headers.stats.misses-misses; h != 3 || m != 0 {
		t.Fatalf("the purge took %d tasks from the header cache and missed %d; want 3 and 0", h, m)
	}
	for _, id := range ids {
		if _, _, ok := c.headers.take(id); ok {
			t.Fatalf("a purged task %s left its header behind", id)
		}
	}
	checkKeyspace(t, b.f)
	if ha, hb := mustHash(t, a.f), mustHash(t, b.f); ha != hb {
		t.Fatalf("hash %s with the cache, %s without it", hb, ha)
	}
}
