package fsm

import (
	"slices"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// delayedView is what the readers of the delayed index answer at now: the
// listing of queue q/a, whether the leader would promote, and the delayed
// head the claim view keeps for q/a.
type delayedView struct {
	listed []string
	due    bool
	head   int64
}

func readDelayed(t *testing.T, h *harness, now int64) delayedView {
	t.Helper()
	due, _, err := h.f.HasDue(now)
	if err != nil {
		t.Fatal(err)
	}
	v := h.f.claims
	v.mu.RLock()
	head := v.queues[QueueRef{"q", "a"}].head
	v.mu.RUnlock()
	return delayedView{listIDs(t, h, pb.TaskState_TASK_STATE_DELAYED, "", 3), due, head}
}

func (v delayedView) equal(w delayedView) bool {
	return slices.Equal(v.listed, w.listed) && v.due == w.due && v.head == w.head
}

// Test_DelayedIndexAcrossTheLatch: below level 19 the listing of delayed
// tasks, the leader's HasDue, the claim view's delayed heads and
// PromoteDelayed could be read from the stored keys; from the latch on
// they are read from the delayed orders alone, and the latch deletes the
// keys. The answers are the same on both sides, a listing cursor taken
// before the latch pages on after it, and the orders follow promotion,
// cancellation and a reopen.
func Test_DelayedIndexAcrossTheLatch(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(LevelDelayedInMemory - 1))
	// Delays out of enqueue order, so that time order is not id order;
	// two tasks share a time, which the id then orders.
	delays := []time.Duration{9, 3, 7, 3, 12, 1, 5, 10, 2, 8}
	for _, d := range delays {
		n := nt("q", "a", 0)
		n.DelayNs = int64(d * time.Second)
		h.enqueue(at(0), n)
	}
	other := nt("r", "a", 0)
	other.DelayNs = int64(4 * time.Second)
	otherID := h.enqueue(at(0), other)[0]

	early, mid := at(500*time.Millisecond), at(4500*time.Millisecond)
	beforeEarly, beforeMid := readDelayed(t, h, early), readDelayed(t, h, mid)
	if len(beforeMid.listed) != len(delays) || beforeEarly.due || !beforeMid.due || beforeMid.head != at(time.Second) {
		t.Fatalf("at level 18: %+v by %d, %+v by %d", beforeEarly, early, beforeMid, mid)
	}
	page, cursor, err := h.f.ListTasks("q", "a", pb.TaskState_TASK_STATE_DELAYED, "", 4)
	if err != nil || cursor == "" || len(page) != 4 {
		t.Fatalf("first page: %d tasks, cursor %q, %v", len(page), cursor, err)
	}

	h.do(latchCmd(LevelDelayedInMemory))
	checkKeyspace(t, h.f)
	if v := readDelayed(t, h, early); !v.equal(beforeEarly) {
		t.Fatalf("by %d at level 19: %+v; at 18: %+v", early, v, beforeEarly)
	}
	if v := readDelayed(t, h, mid); !v.equal(beforeMid) {
		t.Fatalf("by %d at level 19: %+v; at 18: %+v", mid, v, beforeMid)
	}
	if rest := listIDs(t, h, pb.TaskState_TASK_STATE_DELAYED, cursor, 5); !slices.Equal(rest, beforeMid.listed[4:]) {
		t.Fatalf("a level-18 cursor paged on to\n%v\nwant\n%v", rest, beforeMid.listed[4:])
	}

	// PromoteDelayed takes the due tasks of every queue, earliest first:
	// by mid, the tasks of 1, 2, 3, 3 seconds in q/a (the listing's first
	// four) and the one of r/a at 4 s; with a limit of 3, the first three.
	res := h.do(promoteCmd(mid, 3))
	var promoted []string
	for _, it := range res.GetItems() {
		promoted = append(promoted, it.GetTaskId())
	}
	if !slices.Equal(promoted, beforeMid.listed[:3]) {
		t.Fatalf("promoted %v, want %v", promoted, beforeMid.listed[:3])
	}
	checkKeyspace(t, h.f)
	res = h.do(promoteCmd(mid, 10))
	promoted = promoted[:0]
	for _, it := range res.GetItems() {
		promoted = append(promoted, it.GetTaskId())
	}
	if want := []string{beforeMid.listed[3], otherID}; !slices.Equal(promoted, want) {
		t.Fatalf("the second promotion took %v, want %v", promoted, want)
	}
	left := beforeMid.listed[4:]
	if got := readDelayed(t, h, mid); !slices.Equal(got.listed, left) || got.due || got.head != at(5*time.Second) {
		t.Fatalf("after the promotions: %+v, want %v listed, none due, the head at 5 s", got, left)
	}

	// Cancelling the head moves it on.
	if c := h.do(cancelCmd(mid, left[0])).GetItems()[0].GetCode(); c != pb.Code_CODE_OK {
		t.Fatalf("cancel: %v", c)
	}
	checkKeyspace(t, h.f)
	want := readDelayed(t, h, mid)
	if want.head != at(7*time.Second) || !slices.Equal(want.listed, left[1:]) {
		t.Fatalf("after cancelling the head: %+v", want)
	}
	h.reopen()
	checkKeyspace(t, h.f)
	if got := readDelayed(t, h, mid); !got.equal(want) {
		t.Fatalf("after a reopen: %+v, before it %+v", got, want)
	}
}
