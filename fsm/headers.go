package fsm

import (
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/proto/taskwire"
	"github.com/dockethq/docket/storage"
)

// headerCache holds the decoded headers (records without their payload,
// or whole records of small payloads from LevelInlineBodies) of running
// tasks, as apply last wrote them, so that the heartbeat,
// submit, nack or reap that ends a claim takes the task from memory
// instead of reading its record and decoding it again. In a drain that
// read and decode were 7 % of a follower's CPU (BENCHMARKS.md).
//
// It also holds the whole records of finished tasks whose retention ends
// within shortRetention, for the purge that removes them: by then their
// records have left the memtable, and in a drain of tasks that keep
// nothing the purge's reads were 15 % of the nodes' CPU.
//
// It is part of the recent-record cache and lives as long as it does:
// apply alone uses it, and it is cleared with it when a batch does not
// commit. An entry equals what storage.GetTaskHeader would read through
// the batch at that moment, format included, because every write of a
// t/ key goes through putTask or deleteTask, which replace or drop the
// entry (checkHeaders compares the two after every entry of the
// metamorphic workload).
//
// A read takes the entry out: the reader changes the task it gets, and
// writes it back through putTask if it keeps it, which puts a copy in
// again. A reader that writes nothing back leaves a miss behind, not a
// stale entry. So an entry is copied once per write and never per read.
type headerCache struct {
	m     map[string]cachedHeader
	stats struct{ hits, misses uint64 }
}

type cachedHeader struct {
	t      *pb.Task // owned by the cache: no one else holds it
	format storage.RecordFormat
}

// headerCacheMax bounds the entries: past it a running task is not kept,
// and its end reads its record as before. Each entry is about 400 bytes,
// and up to inlineBodyMax more for a whole record. Finished tasks take at
// most half, so that a backlog of them waiting for the purge does not
// push running tasks out.
const headerCacheMax = 1 << 16

// shortRetention is the furthest end of retention, from the moment a task
// finishes, at which the cache keeps its record for the purge. The
// leader purges every few seconds (cluster.Config.PurgeInterval, 5 s by
// default), so such a record is read within seconds; a task kept longer
// would hold its entry for nothing while others wait.
const shortRetention = int64(10 * time.Second)

func (h *headerCache) clear() { h.m = make(map[string]cachedHeader) }

// keeps reports whether put keeps t, written at now, whole (its payload
// inside its record) or not: a running task while there is room; a
// finished one whose retention ends within shortRetention, only whole
// (the purge needs its payload, expiredTask), while the cache is at most
// half full. A nil cache keeps nothing.
func (h *headerCache) keeps(t *pb.Task, whole bool, now int64) bool {
	if h == nil {
		return false
	}
	_, ok := h.m[t.GetId()]
	switch {
	case t.GetState() == pb.TaskState_TASK_STATE_RUNNING:
		return ok || len(h.m) < headerCacheMax
	case whole && terminal(t.GetState()) && t.GetExpireAt() > 0 && t.GetExpireAt()-now <= shortRetention:
		return ok || len(h.m) < headerCacheMax/2
	}
	return false
}

// put keeps a copy of t as written in format at now, if keeps says so:
// without its payload when split, with it when whole, since a whole
// record's header read holds its payload (and from LevelInlineBodies that
// payload is small).
func (h *headerCache) put(t *pb.Task, format storage.RecordFormat, now int64) {
	id := t.GetId()
	if !h.keeps(t, format == storage.FormatInline, now) {
		delete(h.m, id)
		return
	}
	payload := t.Payload
	if format != storage.FormatInline {
		t.Payload = nil
	}
	c := taskwire.Clone(t)
	t.Payload = payload
	h.m[id] = cachedHeader{t: c, format: format}
}

// take returns the header of id and forgets it.
func (h *headerCache) take(id string) (*pb.Task, storage.RecordFormat, bool) {
	e, ok := h.m[id]
	if !ok {
		h.stats.misses++
		return nil, 0, false
	}
	delete(h.m, id)
	h.stats.hits++
	return e.t, e.format, true
}

// forget drops id's entry: its record is deleted.
func (h *headerCache) forget(id string) { delete(h.m, id) }
