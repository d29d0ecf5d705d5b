package transport

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func Test_HeartbeatsCoalesce(t *testing.T) {
	// A wide window makes the test independent of scheduling: calls that
	// start together share a command.
	ts := mustLeader(t, Config{HeartbeatWindow: 100 * time.Millisecond})
	const n = 40
	tasks := make([]*pb.NewTask, n)
	for i := range tasks {
		tasks[i] = &pb.NewTask{Queue: "q"}
	}
	mustEnqueue(t, ts.q, tasks...)
	claimed := mustClaim(t, ts.q, "q", n)

	ctx := testCtx(t)
	results := make([]*pb.HeartbeatResponse, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, task := range claimed {
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
	wg.Wait()

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
	cmds := ts.node.count(pb.CommandType_COMMAND_TYPE_HEARTBEAT)
	if cmds == 0 || cmds >= n {
		t.Fatalf("%d concurrent heartbeats made %d commands", n, cmds)
	}
	t.Logf("%d heartbeats in %d commands", n, cmds)
	got, err := ts.node.fsm.GetTask(claimed[1].GetId())
	if err != nil || got.GetLeaseNs() != int64(time.Minute) {
		t.Fatalf("lease not extended: %v, %v", got, err)
	}
}

func Test_HeartbeatBatchSplitsAtMaxItems(t *testing.T) {
	ts := mustLeader(t, Config{HeartbeatWindow: time.Hour, HeartbeatMaxItems: 3})
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"}, &pb.NewTask{Queue: "q"}, &pb.NewTask{Queue: "q"})
	claimed := mustClaim(t, ts.q, "q", 3)
	items := make([]*pb.HeartbeatItem, len(claimed))
	for i, task := range claimed {
		items[i] = &pb.HeartbeatItem{TaskId: task.GetId(), Fence: task.GetFence()}
	}
	// A full batch flushes at once instead of waiting out the window.
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
