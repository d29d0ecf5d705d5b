package transport

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

func mustConn(t *testing.T, addr string) pb.QueueClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return pb.NewQueueClient(cc)
}

// claimRefused makes a long-poll Claim that must be refused at once with
// Unavailable, reason OVERLOADED, not left to wait.
func claimRefused(t *testing.T, q pb.QueueClient, queue string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	_, err := q.Claim(ctx, &pb.ClaimRequest{Queue: queue, WorkerId: "w", WaitNs: longWait})
	wantErr(t, err, codes.Unavailable, pb.ReasonOverloaded, "")
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the refusal took %v", took)
	}
}

// Long polls are bounded per connection and in total; a poll without a wait
// is not counted; a slot frees when its poll ends.
func Test_LongPollsBoundedPerConnectionAndInTotal(t *testing.T) {
	ts := mustLeader(t, Config{MaxLongPolls: 3, MaxLongPollsPerConn: 2})
	task := mustEnqueue(t, ts.q, &pb.NewTask{Queue: "busy"})[0]
	mustClaim(t, ts.q, "busy", 1) // running: WaitResult on it waits

	ctxA, cancelA := context.WithCancel(testCtx(t))
	for _, q := range []string{"a0", "a1"} {
		go func() { _, _ = ts.q.Claim(ctxA, &pb.ClaimRequest{Queue: q, WorkerId: "w", WaitNs: longWait}) }()
	}
	testwait.For(t, 10*time.Second, "two claims to wait", func() bool { n, _, _ := ts.node.Service().Waiting(); return n == 2 })
	claimRefused(t, ts.q, "a2") // third on the same connection

	// A claim without a wait is an ordinary call.
	if _, err := ts.q.Claim(testCtx(t), &pb.ClaimRequest{Queue: "a2", WorkerId: "w"}); err != nil {
		t.Fatalf("claim without wait: %v", err)
	}

	// Another connection has room of its own, up to the node's total.
	b := mustConn(t, ts.addr)
	go func() { _, _ = b.WaitResult(testCtx(t), &pb.WaitResultRequest{TaskId: task, WaitNs: longWait}) }()
	testwait.For(t, 10*time.Second, "the WaitResult to wait", func() bool { _, n, _ := ts.node.Service().Waiting(); return n == 1 })
	claimRefused(t, b, "b1")

	// Ending a poll frees its slot.
	cancelA()
	testwait.For(t, 10*time.Second, "the claims to end", func() bool { n, _, _ := ts.node.Service().Waiting(); return n == 0 })
	go func() { _, _ = b.Claim(testCtx(t), &pb.ClaimRequest{Queue: "b1", WorkerId: "w", WaitNs: longWait}) }()
	testwait.For(t, 10*time.Second, "a claim in a freed slot", func() bool { n, _, _ := ts.node.Service().Waiting(); return n == 1 })
}

// Calls a follower forwards share its one connection to the leader, so the
// leader counts them in its total but not against that connection.
func Test_ForwardedLongPollsNotBoundPerConnection(t *testing.T) {
	leader := mustLeader(t, Config{MaxLongPolls: 10, MaxLongPollsPerConn: 1})
	follower := mustFollower(t, leader.addr, Config{MaxLongPolls: 10, MaxLongPollsPerConn: 1})
	for _, q := range []string{"f0", "f1", "f2"} {
		c := mustConn(t, follower.addr) // one poll per connection to the follower
		go func() { _, _ = c.Claim(testCtx(t), &pb.ClaimRequest{Queue: q, WorkerId: "w", WaitNs: longWait}) }()
	}
	testwait.For(t, 10*time.Second, "three forwarded claims to wait on the leader", func() bool { n, _, _ := leader.node.Service().Waiting(); return n == 3 })
}
