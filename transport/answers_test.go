package transport

import (
	"bytes"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Issue 9: ListDead allowed 1,000 tasks of up to 16 MiB in one answer.
// A page stops at fsm.AnswerBudget bytes, and the cursor reaches every
// dead letter.
func Test_ListDeadPagesStayWithinBudget(t *testing.T) {
	ts := mustLeader(t, Config{})
	const n = 7
	for i := 0; i < n; i++ {
		mustEnqueue(t, ts.q, &pb.NewTask{Queue: "big", MaxAttempts: 1, Payload: bytes.Repeat([]byte{'d'}, 1<<20)})
	}
	for i := 0; i < n; i++ {
		task := mustClaim(t, ts.q, "big", 1)[0]
		if _, err := ts.q.Nack(testCtx(t), &pb.NackRequest{TaskId: task.GetId(), Fence: task.GetFence()}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("the cursor never ended")
		}
		resp, err := ts.q.ListDead(testCtx(t), &pb.ListDeadRequest{Queue: "big", Cursor: cursor, Limit: 1000},
			grpc.MaxCallRecvMsgSize(MaxAnswerBytes))
		if err != nil {
			t.Fatal(err)
		}
		if size := proto.Size(resp); len(resp.GetTasks()) > 1 && size > fsm.AnswerBudget+1<<10 {
			t.Fatalf("page of %d tasks is %d bytes, budget %d", len(resp.GetTasks()), size, fsm.AnswerBudget)
		}
		for _, task := range resp.GetTasks() {
			seen[task.GetId()] = true
		}
		if cursor = resp.GetNextCursor(); cursor == "" {
			break
		}
	}
	if len(seen) != n {
		t.Fatalf("listed %d of %d dead letters", len(seen), n)
	}
}
