package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster/memnode"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_ClaimAdmitReadsNoPebble: a Claim's admission (admit, under the
// claim gate's lock) and a wake-up's count (avail) read the queue state
// apply keeps in memory, never Pebble, for a queue with pending tasks
// under limits, a paused one, and one whose tasks are all delayed (the
// case that also listed the delayed head). Before, each look read Pebble
// three or four times (ClaimAllowance, Counts, ListTasks).
func Test_ClaimAdmitReadsNoPebble(t *testing.T) {
	m := mustMemNode(t, true)
	s := m.Service()
	apply := func(cmd *pb.Command) {
		t.Helper()
		res, err := m.Apply(context.Background(), cmd)
		if err != nil || res.GetErrorCode() != pb.Code_CODE_OK {
			t.Fatalf("%v: %v, %v", cmd.GetType(), res, err)
		}
	}
	apply(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_FEATURE_LEVEL,
		Body: &pb.Command_SetFeatureLevel{SetFeatureLevel: &pb.SetFeatureLevelCmd{Level: fsm.FeatureLevel}}})
	limited, paused, later := fsm.QueueRef{Queue: "limited", Tenant: "default"},
		fsm.QueueRef{Queue: "paused", Tenant: "default"}, fsm.QueueRef{Queue: "later", Tenant: "default"}
	runAt := time.Now().Add(time.Hour).UnixNano()
	apply(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE,
		Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: []*pb.NewTask{
			{Queue: limited.Queue, Tenant: limited.Tenant}, {Queue: limited.Queue, Tenant: limited.Tenant},
			{Queue: limited.Queue, Tenant: limited.Tenant},
			{Queue: paused.Queue, Tenant: paused.Tenant},
			{Queue: later.Queue, Tenant: later.Tenant, RunAt: runAt},
		}}}})
	two := uint32(2)
	apply(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS,
		Body: &pb.Command_SetQueueLimits{SetQueueLimits: &pb.SetQueueLimitsCmd{Queue: limited.Queue, Tenant: limited.Tenant, MaxRunning: &two}}})
	apply(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_PAUSED,
		Body: &pb.Command_SetQueuePaused{SetQueuePaused: &pb.SetQueuePausedCmd{Queue: paused.Queue, Tenant: paused.Tenant, Paused: true}}})

	before := m.FSM().Reads()
	for _, c := range []struct {
		ref        fsm.QueueRef
		want, next int64
	}{
		{limited, 2, 0}, // 3 pending, at most 2 running
		{paused, 0, 0},
		{later, 0, runAt},
	} {
		n, next := service.Admit(s, c.ref, 10)
		if int64(n) != c.want || next != c.next {
			t.Errorf("admit %v: reserved %d, next %d; want %d, %d", c.ref, n, next, c.want, c.next)
		}
		service.GateRelease(s, c.ref, n)
		if a := service.Avail(s, c.ref); int64(a) != c.want {
			t.Errorf("avail %v: %d, want %d", c.ref, a, c.want)
		}
	}
	if n := m.FSM().Reads() - before; n != 0 {
		t.Fatalf("claim admission read the keyspace %d times, want 0", n)
	}
}

// BenchmarkClaimAdmit is a Claim's admission on the leader (admit under
// the claim gate's lock, then the release an applied claim makes), for a
// queue with pending tasks and for one whose tasks are all delayed, from
// one caller and from parallel ones: the gate's lock is held while the
// replica is read, so its cost bounds how many claims admit per second.
func BenchmarkClaimAdmit(b *testing.B) {
	m, err := memnode.New(b.TempDir(), true, service.ServiceConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	busy, later := fsm.QueueRef{Queue: "busy", Tenant: "default"}, fsm.QueueRef{Queue: "later", Tenant: "default"}
	tasks := make([]*pb.NewTask, 0, 101)
	for range 100 {
		tasks = append(tasks, &pb.NewTask{Queue: busy.Queue, Tenant: busy.Tenant})
	}
	tasks = append(tasks, &pb.NewTask{Queue: later.Queue, Tenant: later.Tenant, RunAt: time.Now().Add(time.Hour).UnixNano()})
	res, err := m.Apply(context.Background(), &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE,
		Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: tasks}}})
	if err != nil || res.GetErrorCode() != pb.Code_CODE_OK {
		b.Fatalf("enqueue: %v, %v", res, err)
	}
	for _, ref := range []fsm.QueueRef{busy, later} {
		admit := func() {
			n, _ := service.Admit(m.Service(), ref, 1)
			service.GateRelease(m.Service(), ref, n)
		}
		b.Run(ref.Queue, func(b *testing.B) {
			for b.Loop() {
				admit()
			}
		})
		b.Run(ref.Queue+"/parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					admit()
				}
			})
		})
	}
}
