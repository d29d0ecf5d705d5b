package fsm

import (
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_QueueOfWaitingTasksStaysListed: a queue whose only tasks wait on
// parents is not empty. Empty-queue removal (LevelRetries) looked at the
// catalog's counters alone, which do not count WAITING tasks, so such a
// queue vanished from Stats with its lifetime totals.
func Test_QueueOfWaitingTasksStaysListed(t *testing.T) {
	h := newHarness(t)
	h.apply(latchCmd(FeatureLevel))
	parent := h.enqueue(at(0), nt("a", "t", 0))[0]
	child := nt("b", "t", 0)
	child.After = []string{parent}
	h.enqueue(at(time.Second), child)
	all, err := h.f.Stats("b", "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].GetWaiting() != 1 {
		t.Fatalf("stats of a queue with one waiting task: %v", all)
	}
	var s *pb.QueueStats = all[0]
	if s.GetTotals().GetEnqueued() != 1 {
		t.Fatalf("its lifetime totals: %v, want 1 enqueued", s.GetTotals())
	}
	checkKeyspace(t, h.f)
}
