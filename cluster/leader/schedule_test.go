package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// scheduledTasks lists the pending tasks of queue on n's replica.
func scheduledTasks(t *testing.T, n *cluster.Node, queue string) []*pb.Task {
	t.Helper()
	var out []*pb.Task
	cursor := ""
	for {
		tasks, next, err := n.FSM().ListTasks(queue, pb.DefaultTenant, pb.TaskState_TASK_STATE_PENDING, cursor, 1000)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tasks...)
		if next == "" {
			return out
		}
		cursor = next
	}
}

// Test_ScheduleOncePerSlotAcrossTransfers: a schedule at @every 1s with
// catch-up keeps firing across two leadership transfers, one task per
// slot, no slot twice and none missing between the first and the last.
func Test_ScheduleOncePerSlotAcrossTransfers(t *testing.T) {
	nodes := nodetest.ClusterWith(t, 3, func(c *cluster.Config) { c.ScheduleInterval = 50 * time.Millisecond })
	nodetest.WaitLevel(t, fsm.LevelSchedules, nodes...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := nodetest.LeaderOf(t, nodes)
	nodetest.MustApply(t, ctx, l, service.PutScheduleCommand(&pb.Schedule{Name: "tick", Queue: "cron", Spec: "@every 1s",
		Missed: pb.MissedPolicy_MISSED_POLICY_CATCH_UP, CatchupMax: 10, Payload: []byte("tick")}))
	fired := func(n *cluster.Node) uint64 {
		s, err := n.FSM().Schedule(pb.DefaultTenant, "tick")
		if err != nil {
			return 0
		}
		return s.GetFired()
	}
	testwait.For(t, 10*time.Second, "three slots fired", func() bool { return fired(l) >= 3 })
	for range 2 {
		old := l
		if _, err := old.TransferLeadership(ctx, ""); err != nil {
			t.Fatalf("transfer from %s: %v", old.ID(), err)
		}
		testwait.For(t, 10*time.Second, "a new leader", func() bool {
			for _, n := range nodes {
				if n != old && n.IsLeader() {
					l = n
					return true
				}
			}
			return false
		})
		before := fired(l)
		testwait.For(t, 10*time.Second, "three more slots fired by the new leader", func() bool { return fired(l) >= before+3 })
	}
	// A deposed leader's late proposal of the last slot changes nothing.
	// Under load leadership may move once more after the transfers: each
	// proposal goes to whichever node leads when it is made.
	last, err := l.FSM().Schedule(pb.DefaultTenant, "tick")
	if err != nil {
		t.Fatal(err)
	}
	res := applyOnLeader(t, ctx, nodes, service.FireScheduleCommand(pb.DefaultTenant, "tick", last.GetLastSlot()))
	if c := res.GetItems()[0].GetCode(); c != pb.Code_CODE_ALREADY_DONE {
		t.Fatalf("the last slot again: %v", c)
	}
	applyOnLeader(t, ctx, nodes, service.RemoveScheduleCommand("", "tick"))
	l = nodetest.LeaderOf(t, nodes)
	testwait.For(t, 10*time.Second, "every replica applied the removal", func() bool {
		for _, n := range nodes {
			if n.FSM().AppliedIndex() < l.FSM().AppliedIndex() {
				return false
			}
		}
		return true
	})
	tasks := scheduledTasks(t, l, "cron")
	if uint64(len(tasks)) != last.GetFired() {
		t.Fatalf("%d tasks, the schedule counted %d", len(tasks), last.GetFired())
	}
	slots := map[int64]string{}
	lo, hi := int64(0), int64(0)
	for _, task := range tasks {
		s := task.GetScheduleSlot()
		if task.GetSchedule() != "tick" || s%int64(time.Second) != 0 {
			t.Fatalf("task %s: schedule %q slot %d", task.GetId(), task.GetSchedule(), s)
		}
		if other, dup := slots[s]; dup {
			t.Fatalf("slot %d enqueued twice: %s and %s", s, other, task.GetId())
		}
		slots[s] = task.GetId()
		if lo == 0 || s < lo {
			lo = s
		}
		hi = max(hi, s)
	}
	if want := (hi-lo)/int64(time.Second) + 1; int64(len(slots)) != want {
		t.Fatalf("%d slots between %d and %d, want %d: catch-up left a gap", len(slots), lo, hi, want)
	}
	t.Logf("%d slots, once each, across two transfers", len(slots))
}

// Test_ScheduleGatedBeforeLatch: below LevelSchedules a put is refused
// with FEATURE_DISABLED and the scheduler proposes nothing.
func Test_ScheduleGatedBeforeLatch(t *testing.T) {
	n := nodetest.Start(t, nodetest.AtLevel(t, "n1", 1, fsm.LevelQueueControl))
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	testwait.For(t, 5*time.Second, "the old build's level latched", func() bool { return n.FSM().EnabledLevel() == fsm.LevelQueueControl })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := n.Service().Propose(ctx, service.PutScheduleCommand(&pb.Schedule{Name: "tick", Queue: "cron", Spec: "@every 1s"}))
	var fe *service.FeatureError
	if !errors.As(err, &fe) || fe.Need != fsm.LevelSchedules {
		t.Fatalf("put on a level-%d cluster: %v", fsm.LevelQueueControl, err)
	}
	if err := n.Internals().Loops.ScheduleOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// The leader's other loops (the consistency check, the latch) may
	// append entries meanwhile, so look for what a put or fire would have
	// left rather than at the applied index.
	scheds, _, err := n.FSM().ListSchedules(pb.DefaultTenant, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(scheds) != 0 {
		t.Fatalf("a level-%d cluster stored schedules %v", fsm.LevelQueueControl, scheds)
	}
	if tasks := scheduledTasks(t, n, "cron"); len(tasks) != 0 {
		t.Fatalf("a level-%d cluster fired %d tasks", fsm.LevelQueueControl, len(tasks))
	}
}

// applyOnLeader proposes cmd through the node that leads, again through
// the next one when leadership moved before the proposal was made
// (replica.NotLeaderError: nothing was proposed).
func applyOnLeader(t *testing.T, ctx context.Context, nodes []*cluster.Node, cmd *pb.Command) *pb.CommandResult {
	t.Helper()
	for {
		res, err := nodetest.LeaderOf(t, nodes).Service().Propose(ctx, cmd)
		var nl *replica.NotLeaderError
		if errors.As(err, &nl) && ctx.Err() == nil {
			continue
		}
		if err == nil {
			err = pb.ResultError(res)
		}
		if err != nil {
			t.Fatalf("%v: %v", cmd.GetType(), err)
		}
		return res
	}
}
