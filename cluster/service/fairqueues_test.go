package service_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_QueueLimitsCommandPassesFairFields: every optional field of a
// SetQueueLimits request reaches its command as given, nil kept nil, so
// that "keep" and "clear" stay apart for the FSM.
func Test_QueueLimitsCommandPassesFairFields(t *testing.T) {
	order, keep := pb.QueueOrder_QUEUE_ORDER_FAIR, pb.PerKeyPending_PER_KEY_PENDING_KEEP_OLDEST
	req := &pb.SetQueueLimitsRequest{Queue: "q", MaxRunningPerKey: u32p(2), Order: &order, PerKeyPending: &keep, PerKeyPendingDepth: u32p(0)}
	got := service.QueueLimitsCommand(req).GetSetQueueLimits()
	want := &pb.SetQueueLimitsCmd{Queue: "q", Tenant: pb.DefaultTenant, MaxRunningPerKey: u32p(2), Order: &order, PerKeyPending: &keep, PerKeyPendingDepth: u32p(0)}
	if !proto.Equal(got, want) {
		t.Fatalf("command %v, want %v", got, want)
	}
	if c := service.QueueLimitsCommand(&pb.SetQueueLimitsRequest{Queue: "q", MaxRunning: u32p(1)}).GetSetQueueLimits(); c.MaxRunningPerKey != nil || c.Order != nil || c.PerKeyPending != nil || c.PerKeyPendingDepth != nil {
		t.Fatalf("fields not asked for were set: %v", c)
	}
}

// Test_CheckFairFields: the edge's bounds, each naming its field, and a
// command without fair-queue values passing untouched.
func Test_CheckFairFields(t *testing.T) {
	long := make([]byte, service.MaxTaskKeyLen+1)
	enq := func(key []byte) *pb.Command {
		return service.EnqueueCommand(&pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Key: key}}})
	}
	for _, c := range []struct {
		cmd   *pb.Command
		field string
	}{
		{enq(make([]byte, service.MaxTaskKeyLen)), ""},
		{enq(long), "tasks[0].key"},
		{service.SetKeyLimitCommand("q", "", []byte("k"), u32p(0), nil), ""},
		{service.SetKeyLimitCommand("q", "", long, u32p(1), nil), "key"},
		{service.SetKeyLimitCommand("", "", []byte("k"), u32p(1), nil), "queue"},
		{service.SetKeyLimitCommand("q", "", []byte("k"), nil, u32p(service.MaxKeyWeight+1)), "weight"},
		{service.QueueLimitsCommand(&pb.SetQueueLimitsRequest{Queue: "q", PerKeyPendingDepth: u32p(service.MaxPerKeyPendingDepth)}), ""},
		{service.QueueLimitsCommand(&pb.SetQueueLimitsRequest{Queue: "q", MaxRunning: u32p(3)}), ""},
		{&pb.Command{Type: pb.CommandType_COMMAND_TYPE_BATCH, Body: &pb.Command_Batch{Batch: &pb.BatchCmd{Commands: []*pb.Command{enq(nil), enq(long)}}}}, "items[1].tasks[0].key"},
	} {
		err := service.CheckFairFields(c.cmd)
		var field string
		if fe, ok := err.(*pb.FieldError); ok {
			field = fe.Field
		} else if err != nil {
			t.Fatalf("%v: %T %v, want a FieldError", c.cmd, err, err)
		}
		if field != c.field {
			t.Errorf("%v: field %q (%v), want %q", c.cmd, field, err, c.field)
		}
	}
}

// Test_PerKeyLimitedLongPoll: a long poll on a keyed queue whose ready
// tasks all belong to a key at its per-key limit waits without proposing,
// as on a queue at its limit, and wakes when a running task of that key
// ends. It needs the FSM's fair-queue rules, fsm.ClaimView counting only
// the tasks of keys under their limit.
func Test_PerKeyLimitedLongPoll(t *testing.T) {
	n := nodetest.Cluster(t, 1)[0]
	nodetest.WaitLevel(t, fsm.LevelFairQueues, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodetest.MustApply(t, ctx, n, service.QueueLimitsCommand(&pb.SetQueueLimitsRequest{Queue: "a", MaxRunningPerKey: u32p(1)}))
	var tasks []*pb.NewTask
	for range 3 {
		tasks = append(tasks, &pb.NewTask{Queue: "a", Key: []byte("acme")})
	}
	nodetest.MustApply(t, ctx, n, service.EnqueueCommand(&pb.EnqueueRequest{Tasks: tasks}))
	run := nodetest.ClaimNow(t, ctx, n, "a", 0)
	if len(run) != 1 {
		t.Fatalf("first claim took %d", len(run))
	}
	before := n.FSM().AppliedIndex()
	if got := nodetest.ClaimNow(t, ctx, n, "a", 300*time.Millisecond); len(got) != 0 {
		t.Fatalf("a claim over the per-key limit took %v", got)
	}
	if got := n.FSM().AppliedIndex(); got > before+2 {
		t.Fatalf("a waiting claim on a key at its limit proposed: applied %d → %d", before, got)
	}
	ch := claimAsync(t, ctx, n, "a", time.Minute)
	testwait.For(t, 5*time.Second, "the claim to wait", func() bool { _, _, w := n.Service().Waiting(); return w == 1 })
	submitTask(t, ctx, n, run[0])
	if got := within(t, ch, 10*time.Second, "after the key's running task ended"); len(got) != 1 || string(got[0].GetKey()) != "acme" {
		t.Fatalf("woken claim took %v, want one task of acme", got)
	}
}
