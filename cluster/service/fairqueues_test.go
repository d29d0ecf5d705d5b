package service_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/cluster/service"
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
