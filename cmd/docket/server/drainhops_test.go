package server_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// BenchmarkDrainHops takes one step of `docket bench --workload drain`
// apart hop by hop, as BenchmarkEnqueueHops does an enqueue: a Claim of
// drainStep tasks from a backlog, then one SubmitBatch completing them,
// one call at a time, on the same three in-process servers and
// recorders. A drain worker waits for both, so their sum is what one
// worker's step costs at -c 1:
//
//	go test ./cmd/docket/server -run '^$' -bench DrainHops -benchtime 300x
func BenchmarkDrainHops(b *testing.B) {
	ctx, tp, nodes, c := startHopBench(b)
	const warmSteps = 20
	fillDrainBacklog(ctx, b, c, (b.N+warmSteps)*drainStep)
	step := func() (claimed, submitted callMarks) {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		claimed.start = time.Now()
		ts, err := c.Claim(cctx, &pb.ClaimRequest{Queue: "hops", WorkerId: "w", LeaseNs: int64(time.Minute), MaxTasks: drainStep})
		claimed.end = time.Now()
		if err != nil {
			b.Fatal(err)
		}
		if len(ts) != drainStep {
			b.Fatalf("claimed %d tasks, want %d: the backlog ran out", len(ts), drainStep)
		}
		claimed.marks = tp.take()
		reqs := make([]*pb.SubmitRequest, len(ts))
		for i, t := range ts {
			reqs[i] = &pb.SubmitRequest{TaskId: t.GetId(), Fence: t.GetFence(), Outcome: pb.Outcome_OUTCOME_COMPLETED, Result: []byte("ok")}
		}
		submitted.start = time.Now()
		items, err := c.SubmitBatch(cctx, reqs...)
		submitted.end = time.Now()
		if err != nil {
			b.Fatal(err)
		}
		for _, it := range items {
			if err := client.ItemError(it); err != nil {
				b.Fatal(err)
			}
		}
		submitted.marks = tp.take()
		return claimed, submitted
	}
	for range warmSteps {
		step()
	}
	leader := leaderID(nodes)
	var claims, submits []callMarks
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cl, sub := step()
		claims, submits = append(claims, cl), append(submits, sub)
	}
	b.StopTimer()
	at := func(c callMarks) ([]time.Time, string) { return points(c, leader) }
	if b.N >= 100 {
		names := callHops("Claim")
		lad, skipped := ladder(claims, names, at)
		printLadder(os.Stdout, fmt.Sprintf("Claim of %d from a backlog at c=1", drainStep), names, lad, skipped)
		names = callHops("SubmitBatch")
		lad, skipped = ladder(submits, names, at)
		printLadder(os.Stdout, fmt.Sprintf("SubmitBatch of %d at c=1", drainStep), names, lad, skipped)
	}
}

// drainStep is the drain workload's --claim-batch in BENCHMARKS.md's sittings.
const drainStep = 100

// fillDrainBacklog enqueues n 128-byte tasks into the queue "hops", a
// thousand a call.
func fillDrainBacklog(ctx context.Context, b *testing.B, c *client.Client, n int) {
	b.Helper()
	body := hopBody()
	for done := 0; done < n; {
		tasks := make([]*pb.NewTask, min(1000, n-done))
		for i := range tasks {
			tasks[i] = &pb.NewTask{Queue: "hops", Payload: body}
		}
		ectx, ecancel := context.WithTimeout(ctx, 30*time.Second)
		items, err := c.Enqueue(ectx, tasks...)
		ecancel()
		if err != nil {
			b.Fatal(err)
		}
		for _, it := range items {
			if err := client.ItemError(it); err != nil {
				b.Fatal(err)
			}
		}
		done += len(tasks)
	}
}
