package transport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

const longWait = int64(20 * time.Second)

type claimAnswer struct {
	resp *pb.ClaimResponse
	err  error
	took time.Duration
}

func startClaim(t *testing.T, q pb.QueueClient, req *pb.ClaimRequest) <-chan claimAnswer {
	ch := make(chan claimAnswer, 1)
	ctx := testCtx(t)
	go func() {
		start := time.Now()
		resp, err := q.Claim(ctx, req)
		ch <- claimAnswer{resp, err, time.Since(start)}
	}()
	return ch
}

// receive fails when ch does not answer within 5 s, a quarter of the
// long poll's wait.
func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("no answer within 5 s: the waiter was not woken")
		panic("unreachable")
	}
}

func Test_ClaimLongPollWakesOnEnqueue(t *testing.T) {
	ts := mustLeader(t, Config{})
	ch := startClaim(t, ts.q, &pb.ClaimRequest{Queue: "q", WorkerId: "w", WaitNs: longWait})
	testwait.For(t, 10*time.Second, "the claim to wait", func() bool { n, _, _ := ts.node.Service().Waiting(); return n == 1 })
	// Another queue's task does not satisfy it.
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "other"})
	id := mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})[0]

	a := receive(t, ch)
	if a.err != nil || len(a.resp.GetTasks()) != 1 || a.resp.GetTasks()[0].GetId() != id {
		t.Fatalf("claim: %v, %v", a.resp, a.err)
	}
	if a.took >= time.Duration(longWait)/4 {
		t.Fatalf("claim took %v", a.took)
	}
	// An idle waiting worker costs one Claim command: the one that won.
	if n := ts.node.Proposed(pb.CommandType_COMMAND_TYPE_CLAIM); n != 1 {
		t.Fatalf("%d claim commands, want 1", n)
	}
}

func Test_ClaimLongPollWakesForDelayedTask(t *testing.T) {
	ts := mustLeader(t, Config{})
	delay := 200 * time.Millisecond
	id := mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q", DelayNs: int64(delay)})[0]
	a := receive(t, startClaim(t, ts.q, &pb.ClaimRequest{Queue: "q", WorkerId: "w", WaitNs: longWait}))
	if a.err != nil || len(a.resp.GetTasks()) != 1 || a.resp.GetTasks()[0].GetId() != id {
		t.Fatalf("claim: %v, %v", a.resp, a.err)
	}
	if a.took >= time.Duration(longWait)/4 {
		t.Fatalf("claim took %v", a.took)
	}
}

func Test_ClaimWaitRunsOut(t *testing.T) {
	ts := mustLeader(t, Config{MaxClaimWait: 50 * time.Millisecond})
	a := receive(t, startClaim(t, ts.q, &pb.ClaimRequest{Queue: "q", WorkerId: "w", WaitNs: longWait}))
	if a.err != nil || len(a.resp.GetTasks()) != 0 {
		t.Fatalf("claim on an empty queue: %v, %v", a.resp, a.err)
	}
	if a.took < 50*time.Millisecond {
		t.Fatalf("claim returned after %v, before MaxClaimWait", a.took)
	}
	if n := ts.node.Proposed(pb.CommandType_COMMAND_TYPE_CLAIM); n != 0 {
		t.Fatalf("%d claim commands for an empty queue", n)
	}
}

func Test_StopEndsLongPolls(t *testing.T) {
	ts := mustLeader(t, Config{})
	ch := startClaim(t, ts.q, &pb.ClaimRequest{Queue: "q", WorkerId: "w", WaitNs: longWait})
	testwait.For(t, 10*time.Second, "the claim to wait", func() bool { n, _, _ := ts.node.Service().Waiting(); return n == 1 })
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- ts.srv.Stop(ctx)
	}()
	a := receive(t, ch)
	if a.err != nil || len(a.resp.GetTasks()) != 0 {
		t.Fatalf("claim during stop: %v, %v", a.resp, a.err)
	}
	if err := receive(t, stopped); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

func Test_WaitResultWakesOnSubmit(t *testing.T) {
	ts := mustLeader(t, Config{})
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})
	task := mustClaim(t, ts.q, "q", 1)[0]

	type answer struct {
		resp *pb.WaitResultResponse
		err  error
	}
	ch := make(chan answer, 1)
	ctx := testCtx(t)
	go func() {
		resp, err := ts.q.WaitResult(ctx, &pb.WaitResultRequest{TaskId: task.GetId(), WaitNs: longWait})
		ch <- answer{resp, err}
	}()
	testwait.For(t, 10*time.Second, "the wait to start", func() bool { _, n, _ := ts.node.Service().Waiting(); return n == 1 })
	_, err := ts.q.Submit(ctx, &pb.SubmitRequest{TaskId: task.GetId(), Fence: task.GetFence(),
		Outcome: pb.Outcome_OUTCOME_COMPLETED, Result: []byte("42")})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	a := receive(t, ch)
	if a.err != nil || !a.resp.GetDone() || a.resp.GetTask().GetState() != pb.TaskState_TASK_STATE_COMPLETED ||
		string(a.resp.GetTask().GetResult()) != "42" {
		t.Fatalf("wait result: %v, %v", a.resp, a.err)
	}
	if q, tk, _ := ts.node.Service().Waiting(); q+tk != 0 {
		t.Fatalf("hub still holds %d queue and %d task signals", q, tk)
	}

	// A finished task answers at once; a running one runs out the wait.
	resp, err := ts.q.WaitResult(ctx, &pb.WaitResultRequest{TaskId: task.GetId(), WaitNs: longWait})
	if err != nil || !resp.GetDone() {
		t.Fatalf("wait on finished task: %v, %v", resp, err)
	}
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})
	other := mustClaim(t, ts.q, "q", 1)[0]
	resp, err = ts.q.WaitResult(ctx, &pb.WaitResultRequest{TaskId: other.GetId(), WaitNs: int64(20 * time.Millisecond)})
	if err != nil || resp.GetDone() || resp.GetTask().GetId() != other.GetId() {
		t.Fatalf("wait on running task: %v, %v", resp, err)
	}
}

func Test_LongPollEndsBeforeCallerDeadline(t *testing.T) {
	ts := mustLeader(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	resp, err := ts.q.Claim(ctx, &pb.ClaimRequest{Queue: "q", WorkerId: "w", WaitNs: longWait})
	if err != nil || len(resp.GetTasks()) != 0 {
		t.Fatalf("claim with a short deadline: %v, %v; want an empty answer", resp, err)
	}
}

// Test_WaitingClaimsProposeOnlyForWhatIsPending: twenty workers wait on
// an empty queue; each enqueue wakes them all, but only as many Claims are
// proposed as there are tasks, not one per waiter.
func Test_WaitingClaimsProposeOnlyForWhatIsPending(t *testing.T) {
	ts := mustLeader(t, Config{})
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	const waiters = 20
	answers := make(chan claimAnswer, waiters)
	for i := range waiters {
		go func() {
			resp, err := ts.q.Claim(ctx, &pb.ClaimRequest{Queue: "q", WorkerId: fmt.Sprint("w", i), WaitNs: longWait})
			answers <- claimAnswer{resp: resp, err: err}
		}()
	}
	testwait.For(t, 10*time.Second, "every claim to wait", func() bool { return gauge(t, ts) == waiters })

	got := 0
	for _, batch := range []int{1, 5} {
		tasks := make([]*pb.NewTask, batch)
		for i := range tasks {
			tasks[i] = &pb.NewTask{Queue: "q"}
		}
		mustEnqueue(t, ts.q, tasks...)
		for range batch {
			a := receive(t, answers)
			if a.err != nil || len(a.resp.GetTasks()) != 1 {
				t.Fatalf("claim: %v, %d tasks; want one task", a.err, len(a.resp.GetTasks()))
			}
			got++
		}
		// The others go back to waiting.
		testwait.For(t, 10*time.Second, "the rest to wait again", func() bool {
			return gauge(t, ts) == waiters-got
		})
	}
	if n := ts.node.Runs(pb.CommandType_COMMAND_TYPE_CLAIM); n != got {
		t.Fatalf("%d Claim commands for %d tasks and %d waiters, want one per task", n, got, waiters)
	}
}

// gauge is how many long polls wait on the node.
func gauge(t *testing.T, ts *testServer) int {
	t.Helper()
	_, _, n := ts.node.Service().Waiting()
	return n
}
