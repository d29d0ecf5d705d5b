package transport

import (
	"regexp"
	"strconv"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// numbers finds every decimal number in a text.
var numbers = regexp.MustCompile(`[0-9]+`)

// mentions reports whether text names fence as a number of its own.
func mentions(text string, fence uint64) bool {
	for _, n := range numbers.FindAllString(text, -1) {
		if v, err := strconv.ParseUint(n, 10, 64); err == nil && v == fence {
			return true
		}
	}
	return false
}

// wantNoFence fails when err, its message or any of its details names
// fence: a stale writer may learn only that it is stale.
func wantNoFence(t *testing.T, what string, err error, fence uint64) {
	t.Helper()
	st := status.Convert(err)
	text := st.Message()
	for _, d := range st.Details() {
		if m, ok := d.(interface{ String() string }); ok {
			text += " " + m.String()
		}
	}
	if mentions(text, fence) {
		t.Fatalf("%s: answer gives away the current fence %d: %q", what, fence, text)
	}
}

// Test_StaleFenceAnswersHideTheCurrentFence: after a task is claimed again,
// the first worker's Submit, Nack, Heartbeat and SubmitBatch are refused
// over real gRPC, and no answer (message, details, item fields) names the
// new claim's fence; nor does a producer's Cancel or duplicate Enqueue.
func Test_StaleFenceAnswersHideTheCurrentFence(t *testing.T) {
	ts := mustLeader(t, Config{})
	ctx := testCtx(t)
	id := mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q", IdempotencyKey: "k1"})[0]
	first := mustClaim(t, ts.q, "q", 1)[0]
	if _, err := ts.q.Nack(ctx, &pb.NackRequest{TaskId: id, Fence: first.GetFence()}); err != nil {
		t.Fatalf("nack: %v", err)
	}
	// Push the new claim's fence well away from the small numbers an
	// answer may rightly hold (the stale fence, counts).
	for range 20 {
		mustEnqueue(t, ts.q, &pb.NewTask{Queue: "other"})
	}
	current := mustClaim(t, ts.q, "q", 1)[0].GetFence()
	stale := first.GetFence()
	if current <= stale+10 {
		t.Fatalf("fence %d not well above %d", current, stale)
	}

	_, err := ts.q.Submit(ctx, &pb.SubmitRequest{TaskId: id, Fence: stale, Outcome: pb.Outcome_OUTCOME_COMPLETED})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonStaleFence, "")
	wantNoFence(t, "Submit", err, current)

	_, err = ts.q.Nack(ctx, &pb.NackRequest{TaskId: id, Fence: stale})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonStaleFence, "")
	wantNoFence(t, "Nack", err, current)

	hb, err := ts.q.Heartbeat(ctx, &pb.HeartbeatRequest{Items: []*pb.HeartbeatItem{{TaskId: id, Fence: stale}}})
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	sb, err := ts.q.SubmitBatch(ctx, &pb.SubmitBatchRequest{Items: []*pb.SubmitRequest{
		{TaskId: id, Fence: stale, Outcome: pb.Outcome_OUTCOME_COMPLETED}}})
	if err != nil {
		t.Fatalf("submit batch: %v", err)
	}
	for _, it := range []*pb.ItemResult{hb.GetItems()[0], sb.GetItems()[0]} {
		if it.GetCode() != pb.Code_CODE_STALE_FENCE {
			t.Fatalf("stale item answered %v", it)
		}
		if it.GetFence() != 0 || it.GetState() != pb.TaskState_TASK_STATE_UNSPECIFIED || mentions(it.GetDetail(), current) {
			t.Fatalf("stale item gives away the claim: %s", prototext.Format(it))
		}
	}

	// Callers who never held the claim learn no fence either.
	_, err = ts.q.Cancel(ctx, &pb.CancelRequest{TaskId: id})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonWrongState, "")
	wantNoFence(t, "Cancel", err, current)
	dup, err := ts.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", IdempotencyKey: "k1"}}})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if it := dup.GetItems()[0]; it.GetCode() != pb.Code_CODE_DUPLICATE || it.GetFence() != 0 {
		t.Fatalf("duplicate enqueue gives away the claim: %s", prototext.Format(it))
	}

	// The holder still gets its own fence back.
	ok, err := ts.q.Heartbeat(ctx, &pb.HeartbeatRequest{Items: []*pb.HeartbeatItem{{TaskId: id, Fence: current}}})
	if err != nil || ok.GetItems()[0].GetCode() != pb.Code_CODE_OK || ok.GetItems()[0].GetFence() != current {
		t.Fatalf("holder's heartbeat = %v, %v", ok, err)
	}
}
