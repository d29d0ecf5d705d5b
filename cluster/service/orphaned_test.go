package service_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_OrphanedClaimsOnTheService: a claim whose answer went undelivered
// and whose release failed is reported by Orphaned while its task runs
// under that claim; one released is not.
func Test_OrphanedClaimsOnTheService(t *testing.T) {
	m := mustMemNode(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	enq := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE,
		Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "t"}, {Queue: "q", Tenant: "t"}}}}}
	if _, err := m.Service().Propose(ctx, enq); err != nil {
		t.Fatal(err)
	}
	claim := func() *pb.Task {
		t.Helper()
		tasks, err := m.Service().Claim(ctx, m.Service().ClaimCommand(&pb.ClaimRequest{Queue: "q", Tenant: "t", WorkerId: "w", MaxTasks: 1}), 0)
		if err != nil || len(tasks) != 1 {
			t.Fatalf("claim: %v %v", tasks, err)
		}
		return tasks[0]
	}
	running := func() []*pb.Task {
		t.Helper()
		tasks, _, err := m.Service().ListTasks(ctx, &pb.ListTasksRequest{Queue: "q", Tenant: "t", State: pb.TaskState_TASK_STATE_RUNNING}, service.Linearizable)
		if err != nil {
			t.Fatal(err)
		}
		return tasks
	}
	lost := claim()
	m.Fail(errors.New("injected: the release is not proposed"))
	m.Service().ReleaseTasks([]*pb.Task{lost})
	testwait.For(t, 5*time.Second, "the failed release to finish", func() bool { return m.Proposed(pb.CommandType_COMMAND_TYPE_RELEASE) == 0 && !m.FailArmed() })
	if got := m.Service().Orphaned(running()); !slices.Equal(got, []string{lost.GetId()}) {
		t.Fatalf("orphaned %v, want [%s]", got, lost.GetId())
	}

	put := claim()
	m.Service().ReleaseTasks([]*pb.Task{put})
	testwait.For(t, 5*time.Second, "the release to apply", func() bool { return len(running()) == 1 })
	again := claim() // the released task, under a new claim
	if again.GetId() != put.GetId() {
		t.Fatalf("claimed %s, want the released %s", again.GetId(), put.GetId())
	}
	if got := m.Service().Orphaned(running()); !slices.Equal(got, []string{lost.GetId()}) {
		t.Fatalf("orphaned %v after a release and a new claim, want only [%s]", got, lost.GetId())
	}
}
