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

// Test_CommandsCoalesceWhileTheLeaderIsBusy holds the leader's only
// proposal slot, lets twenty callers queue behind it, and checks that they
// share one Batch entry while each gets exactly its own answer, a stale
// Submit failing alone.
func Test_CommandsCoalesceWhileTheLeaderIsBusy(t *testing.T) {
	ts := mustLeaderWith(t, Config{}, service.ServiceConfig{CoalesceInflight: 1})
	claimed := func() []*pb.Task {
		mustEnqueue(t, ts.q, &pb.NewTask{Queue: "work"}, &pb.NewTask{Queue: "work"})
		return mustClaim(t, ts.q, "work", 2)
	}()
	before := ts.node.Proposed(pb.CommandType_COMMAND_TYPE_ENQUEUE)

	release := ts.node.Hold()
	t.Cleanup(release) // before the server's Stop, which waits for the held proposal
	ctx := testCtx(t)
	var wg sync.WaitGroup
	var firstErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, firstErr = ts.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}})
	}()
	testwait.For(t, 10*time.Second, "the first enqueue to hold the slot", func() bool { return ts.node.Held() == 1 })

	const plain = 16
	enq := make([]*pb.EnqueueResponse, plain+2) // then two with one key
	enqErr := make([]error, len(enq))
	for i := range enq {
		task := &pb.NewTask{Queue: "q"}
		if i >= plain {
			task.IdempotencyKey = "same"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			enq[i], enqErr[i] = ts.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{task}})
		}()
	}
	var goodErr, staleErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, goodErr = ts.q.Submit(ctx, &pb.SubmitRequest{TaskId: claimed[0].GetId(), Fence: claimed[0].GetFence(),
			Outcome: pb.Outcome_OUTCOME_COMPLETED})
	}()
	go func() {
		defer wg.Done()
		_, staleErr = ts.q.Submit(ctx, &pb.SubmitRequest{TaskId: claimed[1].GetId(), Fence: claimed[1].GetFence() + 1,
			Outcome: pb.Outcome_OUTCOME_COMPLETED})
	}()
	// The coalescer has taken one of them and waits for the slot with it.
	testwait.For(t, 10*time.Second, "every caller to queue behind the slot", func() bool { return ts.node.Service().QueuedCommands() == len(enq)+2-1 })
	release()
	wg.Wait()

	if firstErr != nil || goodErr != nil {
		t.Fatalf("first enqueue: %v; good submit: %v", firstErr, goodErr)
	}
	wantErr(t, staleErr, codes.FailedPrecondition, pb.ReasonStaleFence, "")
	ids := map[string]bool{}
	for i, r := range enq {
		if enqErr[i] != nil {
			t.Fatalf("enqueue %d: %v", i, enqErr[i])
		}
		if len(r.GetItems()) != 1 {
			t.Fatalf("enqueue %d: %d items, want its own one", i, len(r.GetItems()))
		}
		ids[r.GetItems()[0].GetTaskId()] = true
	}
	if len(ids) != plain+1 {
		t.Fatalf("%d distinct ids from %d plain enqueues and two with one key, want %d", len(ids), plain, plain+1)
	}
	a, b := enq[plain].GetItems()[0], enq[plain+1].GetItems()[0]
	if a.GetTaskId() != b.GetTaskId() || a.GetCode()+b.GetCode() != pb.Code_CODE_DUPLICATE {
		t.Fatalf("same key answered %v %s and %v %s, want one OK and one DUPLICATE of one task",
			a.GetCode(), a.GetTaskId(), b.GetCode(), b.GetTaskId())
	}
	if got := ts.node.Proposed(pb.CommandType_COMMAND_TYPE_BATCH); got != 1 {
		t.Fatalf("%d Batch entries, want the queued callers in one", got)
	}
	if got := ts.node.Proposed(pb.CommandType_COMMAND_TYPE_ENQUEUE) - before; got != 1 {
		t.Fatalf("%d Enqueue entries besides the batch, want only the first caller's", got)
	}
}

// Test_CoalescingOff: CoalesceMax 1 proposes every command alone.
func Test_CoalescingOff(t *testing.T) {
	ts := mustLeaderWith(t, Config{}, service.ServiceConfig{CoalesceMax: 1})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := ts.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}}); err != nil {
				t.Errorf("enqueue: %v", err)
			}
		}()
	}
	wg.Wait()
	if b, e := ts.node.Proposed(pb.CommandType_COMMAND_TYPE_BATCH), ts.node.Proposed(pb.CommandType_COMMAND_TYPE_ENQUEUE); b != 0 || e != 20 {
		t.Fatalf("%d batches and %d enqueue entries, want 0 and 20", b, e)
	}
}

// Test_SubmitBatch: each item of one call answers as its own Submit would.
func Test_SubmitBatch(t *testing.T) {
	ts := mustLeader(t, Config{})
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"}, &pb.NewTask{Queue: "q"})
	tasks := mustClaim(t, ts.q, "q", 2)
	ok := func(tk *pb.Task, fence uint64) *pb.SubmitRequest {
		return &pb.SubmitRequest{TaskId: tk.GetId(), Fence: fence, Outcome: pb.Outcome_OUTCOME_COMPLETED}
	}
	resp, err := ts.q.SubmitBatch(testCtx(t), &pb.SubmitBatchRequest{Items: []*pb.SubmitRequest{
		ok(tasks[0], tasks[0].GetFence()),
		ok(tasks[0], tasks[0].GetFence()),
		ok(tasks[1], tasks[1].GetFence()+1),
		ok(&pb.Task{Id: "nope"}, 1),
	}})
	if err != nil {
		t.Fatalf("submit batch: %v", err)
	}
	want := []pb.Code{pb.Code_CODE_OK, pb.Code_CODE_ALREADY_DONE, pb.Code_CODE_STALE_FENCE, pb.Code_CODE_NOT_FOUND}
	if len(resp.GetItems()) != len(want) {
		t.Fatalf("%d items, want %d", len(resp.GetItems()), len(want))
	}
	for i, it := range resp.GetItems() {
		if it.GetCode() != want[i] {
			t.Fatalf("item %d: %v, want %v", i, it.GetCode(), want[i])
		}
	}
	if got := ts.node.Proposed(pb.CommandType_COMMAND_TYPE_BATCH); got != 1 {
		t.Fatalf("%d Batch entries for one SubmitBatch, want 1", got)
	}
	_, err = ts.q.SubmitBatch(testCtx(t), &pb.SubmitBatchRequest{Items: []*pb.SubmitRequest{ok(tasks[1], tasks[1].GetFence()), {Fence: 1}}})
	wantErr(t, err, codes.InvalidArgument, "", "items[1].task_id")
	_, err = ts.q.SubmitBatch(testCtx(t), &pb.SubmitBatchRequest{})
	wantErr(t, err, codes.InvalidArgument, "", "items")
}
