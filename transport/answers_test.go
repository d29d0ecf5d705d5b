package transport

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
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

// Issue 9: a Claim whose caller was gone by the time it applied (23 s for
// 425 tasks of 1 MiB) left its tasks RUNNING under a lease nobody held,
// and reaping them charged an attempt. The leader releases them, without
// an attempt, and counts them.
func Test_UndeliveredClaimIsReleasedWithoutAttempt(t *testing.T) {
	for _, coalesce := range []int{0, 1} {
		reg := prometheus.NewRegistry()
		ts := mustLeaderWith(t, Config{}, service.ServiceConfig{CoalesceMax: coalesce, Registerer: reg})
		ids := mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})
		ts.node.ApplyLate(true)
		release := ts.node.Hold()
		dl := time.Now().Add(200 * time.Millisecond)
		ctx, cancel := context.WithDeadline(context.Background(), dl)
		_, err := ts.q.Claim(ctx, &pb.ClaimRequest{Queue: "q", WorkerId: "gone", MaxTasks: 1})
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("claim whose caller left: %v", err)
		}
		// The server's deadline, from grpc-timeout, is a little later
		// than the caller's: let it pass too, so the claim applies after
		// the handler's ctx ended.
		testwait.For(t, 10*time.Second, "the server's deadline", func() bool { return time.Now().After(dl.Add(100 * time.Millisecond)) })
		release() // the claim applies now, after its caller left
		testwait.For(t, 10*time.Second, "the undelivered claim to be released", func() bool {
			task, err := ts.node.FSM().GetTask(ids[0])
			return err == nil && task.GetState() == pb.TaskState_TASK_STATE_PENDING && task.GetClaims() == 1
		})
		task, _ := ts.node.FSM().GetTask(ids[0])
		if task.GetAttempts() != 0 {
			t.Fatalf("released task has %d attempts, want 0", task.GetAttempts())
		}
		if n := metricValue(t, reg, "docket_cluster_claim_undelivered_tasks_total"); n != 1 {
			t.Fatalf("undelivered counter %v, want 1", n)
		}
		// The next worker gets it at once.
		if got := mustClaim(t, ts.q, "q", 1); got[0].GetId() != ids[0] {
			t.Fatalf("claimed %s, want the released %s", got[0].GetId(), ids[0])
		}
	}
}

// metricValue reads a counter or gauge without labels from reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name || len(f.GetMetric()) != 1 {
			continue
		}
		m := f.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}
