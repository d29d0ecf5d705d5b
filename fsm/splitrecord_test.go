package fsm

import (
	"bytes"
	"errors"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// recordFormat reads how task id is stored in h's keyspace.
func recordFormat(t *testing.T, h *harness, id string) storage.RecordFormat {
	t.Helper()
	r, release, err := h.f.reader()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_, format, err := storage.GetTaskRecord(r, id)
	if err != nil {
		t.Fatal(err)
	}
	return format
}

// hasBody says whether v/<id> exists.
func hasBody(t *testing.T, h *harness, id string) bool {
	t.Helper()
	r, release, err := h.f.reader()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_, err = getValue(r, storage.BodyKey(id))
	if errors.Is(err, storage.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func getValue(r storage.Reader, key []byte) ([]byte, error) {
	v, closer, err := r.Get(key)
	if err != nil {
		return nil, storage.ErrNotFound
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// walBytes is what apply's batches wrote since open: what Pebble's WAL
// took in when it had one.
func walBytes(h *harness) uint64 { return h.f.written.Load() }

// Test_SplitRecordHeartbeatWritesHeaderOnly: once LevelSplitRecords is
// latched, a task's payload is written once and a heartbeat writes a few
// hundred bytes, not the payload again. Before the split every heartbeat
// of a 64 KiB task wrote 66,093 WAL bytes (BenchmarkHeartbeat_Bytes).
func Test_SplitRecordHeartbeatWritesHeaderOnly(t *testing.T) {
	big := bytes.Repeat([]byte("p"), 64<<10)
	for _, tc := range []struct {
		level   uint32
		maxWAL  uint64 // per heartbeat
		minWAL  uint64
		format  storage.RecordFormat
		hasBody bool
	}{
		{level: LevelQueueControl, minWAL: 64 << 10, maxWAL: 1 << 20, format: storage.FormatInline},
		{level: LevelSplitRecords, minWAL: 1, maxWAL: 2 << 10, format: storage.FormatSplit, hasBody: true},
	} {
		h := newHarness(t)
		h.apply(latchCmd(tc.level))
		task := nt("q", "t", 0)
		task.Payload = big
		id := h.enqueue(at(0), task)[0]
		claimed := h.claimOne(at(time.Second), "q", "t")
		if !bytes.Equal(claimed.GetPayload(), big) {
			t.Fatalf("level %d: the claim's answer lost the payload (%d bytes)", tc.level, len(claimed.GetPayload()))
		}
		before := walBytes(h)
		h.one(heartbeatCmd(at(2*time.Second), &pb.HeartbeatItem{TaskId: id, Fence: claimed.GetFence()}), pb.Code_CODE_OK)
		if n := walBytes(h) - before; n < tc.minWAL || n > tc.maxWAL {
			t.Errorf("level %d: a heartbeat wrote %d WAL bytes, want %d..%d", tc.level, n, tc.minWAL, tc.maxWAL)
		}
		if f := recordFormat(t, h, id); f != tc.format {
			t.Errorf("level %d: record format %d, want %d", tc.level, f, tc.format)
		}
		if got := hasBody(t, h, id); got != tc.hasBody {
			t.Errorf("level %d: body stored %v, want %v", tc.level, got, tc.hasBody)
		}
		if got := h.task(id); !bytes.Equal(got.GetPayload(), big) || got.GetState() != pb.TaskState_TASK_STATE_RUNNING {
			t.Errorf("level %d: read back %s with %d payload bytes", tc.level, got.GetState(), len(got.GetPayload()))
		}
		checkKeyspace(t, h.f)
	}
}

// Test_SplitRecordMigratesAtFirstWrite: a task stored whole before the
// latch is split at its first write after it, and its body leaves with it
// when retention purges it.
func Test_SplitRecordMigratesAtFirstWrite(t *testing.T) {
	h := newHarness(t)
	h.apply(latchCmd(LevelQueueControl))
	full := nt("q", "t", 0)
	empty := nt("q", "t", 0)
	empty.Payload = nil
	ids := h.enqueue(at(0), full, empty)
	for _, id := range ids {
		if f := recordFormat(t, h, id); f != storage.FormatInline {
			t.Fatalf("before the latch %s is stored in format %d", id, f)
		}
	}
	h.apply(latchCmd(LevelSplitRecords))
	if f := recordFormat(t, h, ids[0]); f != storage.FormatInline {
		t.Fatalf("the latch alone rewrote %s (format %d): only writes migrate", ids[0], f)
	}
	for _, want := range []storage.RecordFormat{storage.FormatSplit, storage.FormatSplitEmpty} {
		c := h.claimOne(at(time.Second), "q", "t")
		if f := recordFormat(t, h, c.GetId()); f != want {
			t.Errorf("claimed %s: format %d, want %d", c.GetId(), f, want)
		}
		h.one(completeCmd(at(2*time.Second), c.GetId(), c.GetFence()), pb.Code_CODE_OK)
	}
	if !hasBody(t, h, ids[0]) || hasBody(t, h, ids[1]) {
		t.Fatalf("bodies: %v %v, want only the task with a payload to have one", hasBody(t, h, ids[0]), hasBody(t, h, ids[1]))
	}
	checkKeyspace(t, h.f)
	h.apply(purgeCmd(at(pb.DefaultRetention+time.Hour), 100))
	for _, id := range ids {
		if hasBody(t, h, id) {
			t.Errorf("purged %s kept its body", id)
		}
	}
	checkKeyspace(t, h.f)
}

// Test_KeyspaceTooNewRefused: a build that applies a lower level than the
// keyspace latched (a downgrade, or a newer cluster's snapshot) refuses to
// open it instead of misreading split records.
func Test_KeyspaceTooNewRefused(t *testing.T) {
	h := newHarness(t)
	h.apply(latchCmd(LevelSplitRecords))
	h.enqueue(at(0), nt("q", "t", 0))
	if err := h.f.Close(); err != nil {
		t.Fatal(err)
	}
	old := levelOverride
	levelOverride = "7"
	defer func() { levelOverride = old }()
	f, err := Open(h.dir, h.opts)
	if err == nil {
		_ = f.Close()
		t.Fatal("a level-7 build opened a keyspace latched at level 13")
	}
	if !errors.Is(err, ErrKeyspaceTooNew) {
		t.Fatalf("open: %v, want ErrKeyspaceTooNew", err)
	}
	levelOverride = old
	h.f = mustOpen(t, h.dir, h.opts)
}

// Test_SmallBodiesStayInTheirRecords: from LevelInlineBodies a new task
// whose payload is 1 to inlineBodyMax bytes is written whole, one key, and
// stays whole through its claim, heartbeat and end; a larger payload is
// split as before, and an empty one keeps its bodiless split record. A
// whole record written before LevelSplitRecords stays whole when its
// payload is small and is split when it is not. Below the level every
// payload is split, as an older build writes it.
func Test_SmallBodiesStayInTheirRecords(t *testing.T) {
	small, edge, large := []byte("s"), bytes.Repeat([]byte("e"), inlineBodyMax), bytes.Repeat([]byte("l"), inlineBodyMax+1)
	type want struct {
		format storage.RecordFormat
		body   bool
	}
	whole, split, bare := want{storage.FormatInline, false}, want{storage.FormatSplit, true}, want{storage.FormatSplitEmpty, false}
	for _, tc := range []struct {
		level uint32
		want  []want // for small, edge, large, empty
	}{
		{level: FeatureLevel, want: []want{whole, whole, split, bare}},
		{level: LevelExpiryInMemory, want: []want{split, split, split, bare}},
	} {
		h := newHarness(t)
		h.apply(latchCmd(tc.level))
		var tasks []*pb.NewTask
		for _, p := range [][]byte{small, edge, large, nil} {
			task := nt("q", "t", 0)
			task.Payload = p
			tasks = append(tasks, task)
		}
		ids := h.enqueue(at(0), tasks...)
		check := func(when string) {
			t.Helper()
			for i, id := range ids {
				if f, b := recordFormat(t, h, id), hasBody(t, h, id); f != tc.want[i].format || b != tc.want[i].body {
					t.Errorf("level %d, %s: task %d stored in format %d with body %v, want %d with body %v",
						tc.level, when, i, f, b, tc.want[i].format, tc.want[i].body)
				}
			}
			checkKeyspace(t, h.f)
		}
		check("enqueued")
		for i := range ids {
			c := h.claimOne(at(time.Second), "q", "t")
			if c.GetId() != ids[i] || !bytes.Equal(c.GetPayload(), tasks[i].GetPayload()) {
				t.Fatalf("level %d: claim %d took %s with %d payload bytes, want %s with %d", tc.level, i,
					c.GetId(), len(c.GetPayload()), ids[i], len(tasks[i].GetPayload()))
			}
			h.one(heartbeatCmd(at(2*time.Second), &pb.HeartbeatItem{TaskId: c.GetId(), Fence: c.GetFence()}), pb.Code_CODE_OK)
			h.one(completeCmd(at(3*time.Second), c.GetId(), c.GetFence()), pb.Code_CODE_OK)
		}
		check("completed")
		for i, id := range ids {
			if got := h.task(id); !bytes.Equal(got.GetPayload(), tasks[i].GetPayload()) || got.GetState() != pb.TaskState_TASK_STATE_COMPLETED {
				t.Errorf("level %d: read back task %d %s with %d payload bytes", tc.level, i, got.GetState(), len(got.GetPayload()))
			}
		}
		h.apply(purgeCmd(at(pb.DefaultRetention+time.Hour), 100))
		for _, id := range ids {
			if hasBody(t, h, id) {
				t.Errorf("level %d: purged %s kept its body", tc.level, id)
			}
		}
		checkKeyspace(t, h.f)
	}

	// Whole records from before the split meet the level.
	h := newHarness(t)
	h.apply(latchCmd(LevelQueueControl))
	var old []*pb.NewTask
	for _, p := range [][]byte{small, large} {
		task := nt("q", "t", 0)
		task.Payload = p
		old = append(old, task)
	}
	ids := h.enqueue(at(0), old...)
	h.apply(latchCmd(FeatureLevel))
	for i, w := range []want{whole, split} {
		c := h.claimOne(at(time.Second), "q", "t")
		if c.GetId() != ids[i] || !bytes.Equal(c.GetPayload(), old[i].GetPayload()) {
			t.Fatalf("claim %d took %s with %d payload bytes", i, c.GetId(), len(c.GetPayload()))
		}
		if f, b := recordFormat(t, h, ids[i]), hasBody(t, h, ids[i]); f != w.format || b != w.body {
			t.Errorf("an old whole record of %d payload bytes is stored in format %d with body %v after its claim, want %d with body %v",
				len(old[i].GetPayload()), f, b, w.format, w.body)
		}
	}
	checkKeyspace(t, h.f)
}

// Test_SmallBodyHeartbeatBytes bounds what a whole record costs each
// heartbeat: at most inlineBodyMax bytes more than a split record's.
func Test_SmallBodyHeartbeatBytes(t *testing.T) {
	perHeartbeat := func(level uint32) uint64 {
		h := newHarness(t)
		h.apply(latchCmd(level))
		task := nt("q", "t", 0)
		task.Payload = bytes.Repeat([]byte("p"), inlineBodyMax)
		id := h.enqueue(at(0), task)[0]
		c := h.claimOne(at(time.Second), "q", "t")
		before := walBytes(h)
		h.one(heartbeatCmd(at(2*time.Second), &pb.HeartbeatItem{TaskId: id, Fence: c.GetFence()}), pb.Code_CODE_OK)
		return walBytes(h) - before
	}
	whole, split := perHeartbeat(FeatureLevel), perHeartbeat(LevelExpiryInMemory)
	if whole <= split || whole > split+inlineBodyMax+16 {
		t.Fatalf("a heartbeat wrote %d bytes of a whole record and %d of a split one: want the body's %d more, no more",
			whole, split, inlineBodyMax)
	}
}
