package service

import (
	"fmt"
	"slices"
	"testing"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func runningTask(id string, fence uint64) *pb.Task {
	return &pb.Task{Id: id, Fence: fence, State: pb.TaskState_TASK_STATE_RUNNING}
}

// Test_OrphanSetIsBounded: the set keeps the newest maxOrphans claims,
// matches by (id, fence) and only running tasks, and forgets put-back
// claims.
func Test_OrphanSetIsBounded(t *testing.T) {
	o := newOrphanSet()
	for i := range maxOrphans + 10 {
		o.add([]*pb.Task{runningTask(fmt.Sprintf("t%d", i), uint64(i+1))})
	}
	o.add([]*pb.Task{runningTask("t20", 21)}) // again: no second slot
	if n := o.len(); n != maxOrphans {
		t.Fatalf("set holds %d orphans, want the bound %d", n, maxOrphans)
	}
	got := o.match([]*pb.Task{
		runningTask("t0", 1),   // evicted: the oldest
		runningTask("t9", 10),  // evicted
		runningTask("t10", 11), // the oldest kept
		runningTask("t11", 99), // same task, a later claim: not an orphan
		{Id: "t12", Fence: 13}, // no longer running
		runningTask(fmt.Sprintf("t%d", maxOrphans+9), uint64(maxOrphans+10)), // the newest
	})
	if want := []string{"t10", fmt.Sprintf("t%d", maxOrphans+9)}; !slices.Equal(got, want) {
		t.Fatalf("matched %v, want %v", got, want)
	}
	o.forget([]*pb.ReapItem{{TaskId: "t10", Fence: 11}})
	if got := o.match([]*pb.Task{runningTask("t10", 11)}); len(got) != 0 {
		t.Fatalf("a put-back claim still matched: %v", got)
	}
	// A slot freed by forget is reused without evicting a live orphan twice.
	for i := range 2 * maxOrphans {
		o.add([]*pb.Task{runningTask(fmt.Sprintf("u%d", i), 1)})
	}
	if n := o.len(); n != maxOrphans {
		t.Fatalf("after wrapping twice the set holds %d, want %d", n, maxOrphans)
	}
}
