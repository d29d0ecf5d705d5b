package fsm

import (
	"slices"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// listIDs pages through a queue's tasks in one state from cursor, limit
// at a time, and returns the ids in listing order.
func listIDs(t *testing.T, h *harness, state pb.TaskState, cursor string, limit int) []string {
	t.Helper()
	var ids []string
	for {
		page, next, err := h.f.ListTasks("q", "a", state, cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range page {
			ids = append(ids, task.GetId())
		}
		if next == "" {
			return ids
		}
		cursor = next
	}
}

// listPending is listIDs of the pending tasks.
func listPending(t *testing.T, h *harness, cursor string, limit int) []string {
	t.Helper()
	return listIDs(t, h, pb.TaskState_TASK_STATE_PENDING, cursor, limit)
}

// Test_PendingListingAcrossTheLatch: the listing of pending tasks reads
// the stored keys' order below level 17 and the ready order from it on.
// Both give the same tasks in the same order (highest priority first,
// then FIFO), Stats' oldest pending is the same, and a cursor taken
// before the latch pages on after it, when the keys it named are gone.
func Test_PendingListingAcrossTheLatch(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(LevelPendingInMemory - 1))
	for i := range 25 {
		h.enqueue(at(time.Duration(i)*time.Millisecond), nt("q", "a", uint32(i%3*4)))
	}
	claimed := h.claim(at(time.Second), "q", "a", 2) // the listing starts past the heads
	before := listPending(t, h, "", 4)
	if len(before) != 23 {
		t.Fatalf("listed %d pending tasks, want 23", len(before))
	}
	for _, c := range claimed {
		if slices.Contains(before, c.GetId()) {
			t.Fatalf("claimed task %s listed as pending", c.GetId())
		}
	}
	oldest := h.stats("q", "a").GetOldestPendingAt()
	page, cursor, err := h.f.ListTasks("q", "a", pb.TaskState_TASK_STATE_PENDING, "", 7)
	if err != nil || cursor == "" || len(page) != 7 {
		t.Fatalf("first page: %d tasks, cursor %q, %v", len(page), cursor, err)
	}

	h.do(latchCmd(LevelPendingInMemory))
	checkKeyspace(t, h.f)
	if after := listPending(t, h, "", 4); !slices.Equal(after, before) {
		t.Fatalf("listing at level 17:\n%v\nat level 16:\n%v", after, before)
	}
	if rest := listPending(t, h, cursor, 5); !slices.Equal(rest, before[7:]) {
		t.Fatalf("a level-16 cursor paged on to\n%v\nwant\n%v", rest, before[7:])
	}
	if got := h.stats("q", "a").GetOldestPendingAt(); got != oldest || got == 0 {
		t.Fatalf("oldest pending %d at level 17, %d at 16", got, oldest)
	}
	// And the order follows apply: the head leaves with a claim.
	head := h.claimOne(at(2*time.Second), "q", "a")
	if head.GetId() != before[0] {
		t.Fatalf("claimed %s, the listing's head is %s", head.GetId(), before[0])
	}
	if got := listPending(t, h, "", 100); !slices.Equal(got, before[1:]) {
		t.Fatalf("after a claim the listing is\n%v\nwant\n%v", got, before[1:])
	}
	h.reopen()
	if got := listPending(t, h, "", 3); !slices.Equal(got, before[1:]) {
		t.Fatalf("after a reopen the listing is\n%v\nwant\n%v", got, before[1:])
	}
}
