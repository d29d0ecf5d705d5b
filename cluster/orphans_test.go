package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

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

// Test_OrphanedClaimsOnTheService: a claim whose answer went undelivered
// and whose release failed is reported by Orphaned while its task runs
// under that claim; one released is not.
func Test_OrphanedClaimsOnTheService(t *testing.T) {
	m := mustMemNode(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	enq := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE,
		Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "t"}, {Queue: "q", Tenant: "t"}}}}}
	if _, err := m.Propose(ctx, enq); err != nil {
		t.Fatal(err)
	}
	claim := func() *pb.Task {
		t.Helper()
		tasks, err := m.Claim(ctx, m.ClaimCommand(&pb.ClaimRequest{Queue: "q", Tenant: "t", WorkerId: "w", MaxTasks: 1}), 0)
		if err != nil || len(tasks) != 1 {
			t.Fatalf("claim: %v %v", tasks, err)
		}
		return tasks[0]
	}
	running := func() []*pb.Task {
		t.Helper()
		tasks, _, err := m.ListTasks(ctx, &pb.ListTasksRequest{Queue: "q", Tenant: "t", State: pb.TaskState_TASK_STATE_RUNNING}, Linearizable)
		if err != nil {
			t.Fatal(err)
		}
		return tasks
	}
	lost := claim()
	m.Fail(errors.New("injected: the release is not proposed"))
	m.ReleaseTasks([]*pb.Task{lost})
	waitFor(t, 5*time.Second, "the failed release to finish", func() bool { return m.Proposed(pb.CommandType_COMMAND_TYPE_RELEASE) == 0 && m.failNext.Load() == nil })
	if got := m.Orphaned(running()); !slices.Equal(got, []string{lost.GetId()}) {
		t.Fatalf("orphaned %v, want [%s]", got, lost.GetId())
	}

	put := claim()
	m.ReleaseTasks([]*pb.Task{put})
	waitFor(t, 5*time.Second, "the release to apply", func() bool { return len(running()) == 1 })
	again := claim() // the released task, under a new claim
	if again.GetId() != put.GetId() {
		t.Fatalf("claimed %s, want the released %s", again.GetId(), put.GetId())
	}
	if got := m.Orphaned(running()); !slices.Equal(got, []string{lost.GetId()}) {
		t.Fatalf("orphaned %v after a release and a new claim, want only [%s]", got, lost.GetId())
	}
}
