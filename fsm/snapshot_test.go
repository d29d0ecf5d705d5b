package fsm

import (
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_SnapshotRestoreRoundTrip: a snapshot restores into a fresh FSM and
// into one with other state, with the same hash, index and time.
func Test_SnapshotRestoreRoundTrip(t *testing.T) {
	logs, _ := crashLog(t, 400)
	a := newHarness(t)
	a.f.ApplyBatch(logs)
	snap, want := mustSnapshot(t, a.f), mustHash(t, a.f)
	for _, prior := range []int{0, 50, len(logs)} {
		b := newHarness(t)
		if prior > 0 {
			b.f.ApplyBatch(logs[:prior])
		}
		if err := restoreFrom(b.f, snap); err != nil {
			t.Fatal(err)
		}
		if mustHash(t, b.f) != want || b.f.AppliedIndex() != a.f.AppliedIndex() || b.f.Now() != a.f.Now() {
			t.Fatalf("prior %d: restored state differs", prior)
		}
		checkDirs(t, vfs.Default, b.dir)
		b.reopen()
		if mustHash(t, b.f) != want {
			t.Fatalf("prior %d: restored state lost on reopen", prior)
		}
	}
	// An empty FSM's snapshot empties a full one.
	empty := newHarness(t)
	if err := restoreFrom(a.f, mustSnapshot(t, empty.f)); err != nil {
		t.Fatal(err)
	}
	if a.f.AppliedIndex() != 0 || mustHash(t, a.f) != mustHash(t, empty.f) {
		t.Fatal("restore of an empty snapshot kept state")
	}
}

// Test_RestoreWhileSnapshotUnpersisted: Raft takes a snapshot on the FSM
// goroutine and persists it later from another; a Restore may come in
// between (a follower installing the leader's snapshot). The Restore must
// succeed, and the stale snapshot must fail cleanly instead of reading a
// closed database.
func Test_RestoreWhileSnapshotUnpersisted(t *testing.T) {
	logs, _ := crashLog(t, 300)
	leader := newHarness(t)
	leader.f.ApplyBatch(logs)
	install := mustSnapshot(t, leader.f)

	h := newHarness(t)
	h.f.ApplyBatch(logs[:100])
	pending, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := restoreFrom(h.f, install); err != nil {
		t.Fatalf("Restore with a snapshot outstanding: %v", err)
	}
	if mustHash(t, h.f) != mustHash(t, leader.f) {
		t.Fatal("restored state differs from the leader's")
	}
	sink := &bufSink{}
	if err := pending.Persist(sink); err == nil || !sink.cancelled {
		t.Fatalf("Persist of a snapshot older than the restore: err %v, cancelled %v", err, sink.cancelled)
	}
	pending.Release()
	pending.Release() // Raft releases once; a second call must still be harmless
	h.f.ApplyBatch(logs)
	checkKeyspace(t, h.f)

	// Close with an unpersisted snapshot does not fail either.
	late, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.f.Close(); err != nil {
		t.Fatalf("Close with a snapshot outstanding: %v", err)
	}
	late.Release()
}

// gateSink blocks its first Write until the test opens the gate.
type gateSink struct {
	bufSink
	entered chan struct{}
	gate    chan struct{}
	once    sync.Once
}

func (s *gateSink) Write(p []byte) (int, error) {
	s.once.Do(func() {
		close(s.entered)
		<-s.gate
	})
	return s.bufSink.Write(p)
}

// Test_RestoreWaitsForPersistInProgress: a snapshot already streaming
// finishes with the state it was taken from, and the Restore then goes on.
func Test_RestoreWaitsForPersistInProgress(t *testing.T) {
	logs, _ := crashLog(t, 300)
	leader := newHarness(t)
	leader.f.ApplyBatch(logs)
	install := mustSnapshot(t, leader.f)

	h := newHarness(t)
	h.f.ApplyBatch(logs[:100])
	before := mustHash(t, h.f)
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &gateSink{entered: make(chan struct{}), gate: make(chan struct{})}
	persisted := make(chan error, 1)
	go func() {
		persisted <- snap.Persist(sink)
		snap.Release()
	}()
	<-sink.entered // Persist is streaming
	restored := make(chan error, 1)
	go func() { restored <- restoreFrom(h.f, install) }()
	close(sink.gate)
	if err := <-persisted; err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if err := <-restored; err != nil {
		t.Fatalf("Restore: %v", err)
	}
	old := newHarness(t)
	if err := restoreFrom(old.f, sink.Bytes()); err != nil {
		t.Fatal(err)
	}
	if mustHash(t, old.f) != before {
		t.Fatal("the persisted snapshot is not the state it was taken from")
	}
	if mustHash(t, h.f) != mustHash(t, leader.f) {
		t.Fatal("Restore did not install the leader's state")
	}
}

// Test_ObserverEvents: the observer hears of queues that gained claimable
// tasks and of tasks that finished, once per apply batch.
func Test_ObserverEvents(t *testing.T) {
	h := newHarness(t)
	var events []Event
	h.f.SetObserver(func(e Event) { events = append(events, e) })
	h.enqueue(at(0), nt("q", "a", 0), nt("q", "a", 0), nt("q", "b", 0))
	c := h.claimOne(at(0), "q", "a")
	h.one(completeCmd(at(0), c.GetId(), c.GetFence()), pb.Code_CODE_OK)
	delayed := nt("q", "c", 0)
	delayed.DelayNs = int64(time.Second)
	h.enqueue(at(0), delayed)
	if len(events) != 2 {
		t.Fatalf("%d events, want 2 (enqueue, submit): %+v", len(events), events)
	}
	if e := events[0]; len(e.Pending) != 2 || e.Pending[0] != (QueueCount{QueueRef{"q", "a"}, 2}) || e.Pending[1] != (QueueCount{QueueRef{"q", "b"}, 1}) || e.Index != 1 {
		t.Fatalf("enqueue event %+v", e)
	}
	if e := events[1]; len(e.Finished) != 1 || e.Finished[0] != c.GetId() {
		t.Fatalf("submit event %+v", e)
	}
	h.f.SetObserver(nil)
	h.enqueue(at(0), nt("q", "a", 0))
	if len(events) != 2 {
		t.Fatal("removed observer was called")
	}
}

// Test_SnapshotBytesIsTheLastPersistedSize feeds docket_fsm_snapshot_bytes.
func Test_SnapshotBytesIsTheLastPersistedSize(t *testing.T) {
	h := newHarness(t)
	if got := h.f.SnapshotBytes(); got != 0 {
		t.Fatalf("before any snapshot: %d", got)
	}
	h.enqueue(t0, nt("q", "t", 0))
	if b := mustSnapshot(t, h.f); int64(len(b)) != h.f.SnapshotBytes() {
		t.Fatalf("persisted %d bytes, SnapshotBytes says %d", len(b), h.f.SnapshotBytes())
	}
}
