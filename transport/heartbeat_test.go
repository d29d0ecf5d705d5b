package transport

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_HeartbeatsCoalesce: heartbeats that arrive while the leader's one
// proposal slot is busy share the next entry, and each caller gets its own
// items' answers.
func Test_HeartbeatsCoalesce(t *testing.T) {
	ts := mustLeaderWith(t, Config{}, service.ServiceConfig{CoalesceInflight: 1})
	const n = 40
	tasks := make([]*pb.NewTask, n)
	for i := range tasks {
		tasks[i] = &pb.NewTask{Queue: "q"}
	}
	mustEnqueue(t, ts.q, tasks...)
	claimed := mustClaim(t, ts.q, "q", n)

	ctx := testCtx(t)
	release := ts.node.Hold()
	t.Cleanup(release)
	// An enqueue held in the other lane does not hold the heartbeats'.
	var other sync.WaitGroup
	other.Add(1)
	go func() {
		defer other.Done()
		if _, err := ts.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "other"}}}); err != nil {
			t.Errorf("enqueue: %v", err)
		}
	}()
	testwait.For(t, 10*time.Second, "the enqueue to be held", func() bool { return ts.node.Held() == 1 })
	results := make([]*pb.HeartbeatResponse, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	beat := func(i int, task *pb.Task) {
		fence := task.GetFence()
		if i == 0 {
			fence++ // one caller's lease is gone; the others' are not
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = ts.q.Heartbeat(ctx, &pb.HeartbeatRequest{Items: []*pb.HeartbeatItem{
				{TaskId: task.GetId(), Fence: fence, LeaseNs: int64(time.Minute)},
			}})
		}()
	}
	// The first heartbeat takes the lane's one slot and is held; of the
	// rest, the lane takes one while it waits for the slot and the others
	// queue.
	beat(0, claimed[0])
	testwait.For(t, 10*time.Second, "the first heartbeat to be held", func() bool { return ts.node.Held() == 2 })
	for i, task := range claimed[1:] {
		beat(i+1, task)
	}
	testwait.For(t, 10*time.Second, "the heartbeats to queue", func() bool { return ts.node.Service().QueuedCommands() == n-2 })
	release()
	wg.Wait()
	other.Wait()

	for i, task := range claimed {
		if errs[i] != nil {
			t.Fatalf("heartbeat %d: %v", i, errs[i])
		}
		items := results[i].GetItems()
		if len(items) != 1 || items[0].GetTaskId() != task.GetId() {
			t.Fatalf("heartbeat %d got items %v, want its own task %s", i, items, task.GetId())
		}
		want := pb.Code_CODE_OK
		if i == 0 {
			want = pb.Code_CODE_STALE_FENCE
		}
		if items[0].GetCode() != want {
			t.Fatalf("heartbeat %d: code %v, want %v", i, items[0].GetCode(), want)
		}
	}
	// The queued heartbeats are adjacent, so they merge into one Heartbeat
	// command (beside the first, which went alone while the slot was free).
	if runs := ts.node.Runs(pb.CommandType_COMMAND_TYPE_HEARTBEAT); runs > 2 {
		t.Fatalf("%d concurrent heartbeats ran as %d Heartbeat commands, want at most 2", n, runs)
	}
	got, err := ts.node.FSM().GetTask(claimed[1].GetId())
	if err != nil || got.GetLeaseNs() != int64(time.Minute) {
		t.Fatalf("lease not extended: %v, %v", got, err)
	}
}

func Test_HeartbeatItemsBounded(t *testing.T) {
	ts := mustLeader(t, Config{})
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"}, &pb.NewTask{Queue: "q"}, &pb.NewTask{Queue: "q"})
	claimed := mustClaim(t, ts.q, "q", 3)
	items := make([]*pb.HeartbeatItem, len(claimed))
	for i, task := range claimed {
		items[i] = &pb.HeartbeatItem{TaskId: task.GetId(), Fence: task.GetFence()}
	}
	resp, err := ts.q.Heartbeat(testCtx(t), &pb.HeartbeatRequest{Items: items})
	if err != nil || len(resp.GetItems()) != 3 {
		t.Fatalf("heartbeat: %v, %v", resp, err)
	}
	// More items than one command may carry is the caller's error.
	big := make([]*pb.HeartbeatItem, 1001)
	for i := range big {
		big[i] = items[0]
	}
	_, err = ts.q.Heartbeat(testCtx(t), &pb.HeartbeatRequest{Items: big})
	wantErr(t, err, codes.InvalidArgument, "", "items")
}
