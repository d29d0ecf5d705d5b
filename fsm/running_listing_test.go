package fsm

import (
	"math"
	"slices"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// listRunning is listIDs of the running tasks.
func listRunning(t *testing.T, h *harness, cursor string, limit int) []string {
	t.Helper()
	return listIDs(t, h, pb.TaskState_TASK_STATE_RUNNING, cursor, limit)
}

// reaped is what the leader's reaper and its TimeOut would propose at now.
func reaped(t *testing.T, h *harness, now int64) (leases, deadlines []*pb.ReapItem) {
	t.Helper()
	leases, err := h.f.ExpiredLeases(now, math.MaxInt32)
	if err != nil {
		t.Fatal(err)
	}
	deadlines, err = h.f.PastDeadlines(now, math.MaxInt32)
	if err != nil {
		t.Fatal(err)
	}
	return leases, deadlines
}

func reapEqual(a, b []*pb.ReapItem) bool {
	return slices.EqualFunc(a, b, func(x, y *pb.ReapItem) bool {
		return x.GetTaskId() == y.GetTaskId() && x.GetFence() == y.GetFence()
	})
}

// Test_RunningIndexAcrossTheLatch: below level 18 the listing of running
// tasks, the expired leases and the past deadlines could be read from the
// stored keys; from the latch on they are read from the running order
// alone, and the latch deletes the keys. The answers are the same on both
// sides, a listing cursor taken before the latch pages on after it, and
// the order follows heartbeats, submits and a reopen.
func Test_RunningIndexAcrossTheLatch(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(LevelRunningInMemory - 1))
	for i := range 12 {
		if i%3 == 0 {
			h.enqueue(at(time.Duration(i)*time.Millisecond), timed(time.Duration(10+i)*time.Second, false))
		} else {
			h.enqueue(at(time.Duration(i)*time.Millisecond), nt("q", "a", 0))
		}
	}
	// Claims at different times end their leases at different times.
	var claimed []*pb.Task
	for i := range 10 {
		claimed = append(claimed, h.claimOne(at(time.Second+time.Duration(i)*time.Second), "q", "a"))
	}
	late := at(time.Hour)
	before := listRunning(t, h, "", 3)
	if len(before) != 10 {
		t.Fatalf("listed %d running tasks, want 10", len(before))
	}
	leases, deadlines := reaped(t, h, late)
	if len(leases) != 10 || len(deadlines) != 4 {
		t.Fatalf("%d expired leases and %d past deadlines, want 10 and 4", len(leases), len(deadlines))
	}
	mid := claimed[4].GetLeaseUntil()
	midLeases, midDeadlines := reaped(t, h, mid)
	if len(midLeases) != 5 {
		t.Fatalf("%d leases ended by the fifth claim's, want 5", len(midLeases))
	}
	page, cursor, err := h.f.ListTasks("q", "a", pb.TaskState_TASK_STATE_RUNNING, "", 4)
	if err != nil || cursor == "" || len(page) != 4 {
		t.Fatalf("first page: %d tasks, cursor %q, %v", len(page), cursor, err)
	}

	h.do(latchCmd(LevelRunningInMemory))
	checkKeyspace(t, h.f)
	if after := listRunning(t, h, "", 3); !slices.Equal(after, before) {
		t.Fatalf("listing at level 18:\n%v\nat level 17:\n%v", after, before)
	}
	if rest := listRunning(t, h, cursor, 5); !slices.Equal(rest, before[4:]) {
		t.Fatalf("a level-17 cursor paged on to\n%v\nwant\n%v", rest, before[4:])
	}
	if l, d := reaped(t, h, late); !reapEqual(l, leases) || !reapEqual(d, deadlines) {
		t.Fatalf("at level 18 the reaper finds %v and %v, at 17 %v and %v", l, d, leases, deadlines)
	}
	if l, d := reaped(t, h, mid); !reapEqual(l, midLeases) || !reapEqual(d, midDeadlines) {
		t.Fatalf("at level 18 by %d the reaper finds %v and %v, at 17 %v and %v", mid, l, d, midLeases, midDeadlines)
	}

	// The order follows apply: a heartbeat moves the first lease past
	// mid, a submit takes the second out.
	first, second := claimed[0], claimed[1]
	hb := h.do(heartbeatCmd(at(5*time.Second), &pb.HeartbeatItem{TaskId: first.GetId(), Fence: first.GetFence(), LeaseNs: int64(time.Hour)}))
	if c := hb.GetItems()[0].GetCode(); c != pb.Code_CODE_OK {
		t.Fatalf("heartbeat: %v", c)
	}
	if c := h.do(completeCmd(at(5*time.Second), second.GetId(), second.GetFence())).GetItems()[0].GetCode(); c != pb.Code_CODE_OK {
		t.Fatalf("submit: %v", c)
	}
	checkKeyspace(t, h.f)
	wantMid := []string{}
	for _, it := range midLeases[2:] {
		wantMid = append(wantMid, it.GetTaskId())
	}
	l, _ := reaped(t, h, mid)
	var gotMid []string
	for _, it := range l {
		gotMid = append(gotMid, it.GetTaskId())
	}
	if !slices.Equal(gotMid, wantMid) {
		t.Fatalf("after a heartbeat and a submit, leases ended by %d: %v, want %v", mid, gotMid, wantMid)
	}
	h.reopen()
	checkKeyspace(t, h.f)
	if got := listRunning(t, h, "", 100); !slices.Equal(got, slices.DeleteFunc(slices.Clone(before), func(id string) bool { return id == second.GetId() })) {
		t.Fatalf("after a reopen the listing is %v", got)
	}
	if l2, _ := reaped(t, h, mid); !reapEqual(l2, l) {
		t.Fatalf("after a reopen the reaper finds %v, before it %v", l2, l)
	}
}
