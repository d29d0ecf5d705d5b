package transport

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/check"
	"github.com/dockethq/docket/cluster/health"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

func Test_ToStatus(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		code   codes.Code
		reason string
		field  string
	}{
		{"nil", nil, codes.OK, "", ""},
		{"field", &pb.FieldError{Field: "tasks[2].queue", Reason: "length 0 not in 1..128"}, codes.InvalidArgument, "", "tasks[2].queue"},
		{"too large", &pb.FieldError{Field: "result", Reason: "9 bytes > 8", TooLarge: true}, codes.ResourceExhausted, "", "result"},
		{"too large, wrapped", fmt.Errorf("submit: %w", &pb.FieldError{Field: "result", TooLarge: true}), codes.ResourceExhausted, "", "result"},
		// The words of a reason are for people; only the type decides.
		{"too large in words only", &pb.FieldError{Field: "result", Reason: "too large: 9 bytes > 8"}, codes.InvalidArgument, "", "result"},
		{"cursor", &pb.FieldError{Field: "cursor", Reason: "not a cursor of this listing"}, codes.InvalidArgument, "", "cursor"},
		{"not found", fmt.Errorf("task x: %w", pb.ErrNotFound), codes.NotFound, "", ""},
		{"stale fence", fmt.Errorf("task x: %w", pb.ErrStaleFence), codes.FailedPrecondition, pb.ReasonStaleFence, ""},
		{"wrong state", fmt.Errorf("task x: %w", pb.ErrWrongState), codes.FailedPrecondition, pb.ReasonWrongState, ""},
		{"tenant limit", fmt.Errorf("task x: %w", pb.ErrTenantLimit), codes.ResourceExhausted, pb.ReasonTenantLimit, ""},
		{"memory limit", &service.MemoryLimitError{Limit: 512 << 20, Use: 470 << 20, RefuseAt: 460 << 20}, codes.ResourceExhausted, pb.ReasonMemoryLimit, ""},
		{"timed out", fmt.Errorf("task x: %w", pb.ErrTimedOut), codes.FailedPrecondition, pb.ReasonTimedOut, ""},
		{"cancelled", fmt.Errorf("task x: %w", pb.ErrCancelled), codes.FailedPrecondition, pb.ReasonCancelled, ""},
		{"leadership lost", fmt.Errorf("%w: raft", replica.ErrLeadershipLost), codes.Unavailable, pb.ReasonLeadershipLost, ""},
		{"log write failed", fmt.Errorf("%w: %w: no space left on device", replica.ErrLeadershipLost, health.ErrLogWrite), codes.Unavailable, pb.ReasonLeadershipLost, ""},
		{"not leader", &replica.NotLeaderError{LeaderID: "n2", LeaderGRPC: "10.0.0.2:7000"}, codes.Unavailable, pb.ReasonNotLeader, ""},
		{"no leader", &replica.NotLeaderError{}, codes.Unavailable, pb.ReasonNotLeader, ""},
		{"shutdown", replica.ErrShutdown, codes.Unavailable, pb.ReasonShuttingDown, ""},
		{"bad backup", fmt.Errorf("restore: %w: cut short", cluster.ErrBadBackup), codes.InvalidArgument, "", ""},
		{"transfer timed out", fmt.Errorf("transfer leadership to n3: %w", cluster.ErrTransferTimedOut), codes.FailedPrecondition, "", ""},
		{"feature disabled", fmt.Errorf("create token: %w", &service.FeatureError{Command: pb.CommandType_COMMAND_TYPE_CREATE_TOKEN, Need: 4, Enabled: 3}),
			codes.FailedPrecondition, pb.ReasonFeatureDisabled, ""},
		{"overloaded", fmt.Errorf("claim: %w", ErrOverloaded), codes.Unavailable, pb.ReasonOverloaded, ""},
		{"diverged", check.ErrDiverged, codes.Unavailable, pb.ReasonNotServing, ""},
		{"awaiting check", check.ErrAwaitingCheck, codes.Unavailable, pb.ReasonNotServing, ""},
		{"deadline", fmt.Errorf("propose: %w", context.DeadlineExceeded), codes.DeadlineExceeded, "", ""},
		{"canceled", context.Canceled, codes.Canceled, "", ""},
		{"passthrough", status.Error(codes.PermissionDenied, "no"), codes.PermissionDenied, "", ""},
		{"other", errBoom, codes.Internal, "", ""},
	}
	sent := map[string]bool{}
	for _, c := range cases {
		sent[c.reason] = c.reason != ""
		t.Run(c.name, func(t *testing.T) {
			err := toStatus(c.err)
			if c.err == nil {
				if err != nil {
					t.Fatalf("toStatus(nil) = %v", err)
				}
				return
			}
			wantErr(t, err, c.code, c.reason, c.field)
			if code, ok := pb.ReasonCodes()[c.reason]; c.reason != "" && (!ok || code != c.code) {
				t.Fatalf("reason %s sent with %v; docketv1.ReasonCodes has %v (listed: %v)", c.reason, c.code, code, ok)
			}
			for _, d := range status.Convert(err).Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() != pb.ErrorDomain {
					t.Fatalf("domain %q", info.GetDomain())
				}
			}
		})
	}
	// The client's test holds it to every reason of docketv1.ReasonCodes;
	// this holds the server to sending each.
	for reason := range pb.ReasonCodes() {
		if !sent[reason] {
			t.Errorf("no case sends reason %s", reason)
		}
	}
	info := status.Convert(toStatus(&replica.NotLeaderError{LeaderGRPC: "10.0.0.2:7000"})).Details()[0].(*errdetails.ErrorInfo)
	if info.GetMetadata()[pb.ErrorInfoLeaderKey] != "10.0.0.2:7000" {
		t.Fatalf("not-leader metadata %v", info.GetMetadata())
	}
}

func Test_ErrorsOverGRPC(t *testing.T) {
	node := newMemNode(t, true, service.ServiceConfig{})
	node.SetLimits(fsm.Limits{MaxPayload: 1024})
	ts := mustServe(t, node, "", Config{})
	ctx := testCtx(t)

	// A bad field is named by its path in the request.
	_, err := ts.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "ok"}, {Queue: "bad/queue"}}})
	wantErr(t, err, codes.InvalidArgument, "", "tasks[1].queue")
	_, err = ts.q.Claim(ctx, &pb.ClaimRequest{Queue: "q"})
	wantErr(t, err, codes.InvalidArgument, "", "worker_id")
	_, err = ts.q.Heartbeat(ctx, &pb.HeartbeatRequest{Items: []*pb.HeartbeatItem{{TaskId: "a", Fence: 1}, {TaskId: "b"}}})
	wantErr(t, err, codes.InvalidArgument, "", "items[1].fence")

	// An oversize payload is ResourceExhausted, and nothing is stored.
	_, err = ts.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Payload: make([]byte, 2048)}}})
	wantErr(t, err, codes.ResourceExhausted, "", "tasks[0].payload")
	// So are an oversize progress and result, named inside their lists.
	_, err = ts.q.Heartbeat(ctx, &pb.HeartbeatRequest{Items: []*pb.HeartbeatItem{{TaskId: "a", Fence: 1}, {TaskId: "b", Fence: 1, Progress: make([]byte, 2048)}}})
	wantErr(t, err, codes.ResourceExhausted, "", "items[1].progress")
	_, err = ts.q.SubmitBatch(ctx, &pb.SubmitBatchRequest{Items: []*pb.SubmitRequest{
		{TaskId: "a", Fence: 1, Outcome: pb.Outcome_OUTCOME_COMPLETED},
		{TaskId: "b", Fence: 1, Outcome: pb.Outcome_OUTCOME_COMPLETED, Result: make([]byte, 2048)}}})
	wantErr(t, err, codes.ResourceExhausted, "", "items[1].result")
	if n := node.Proposed(pb.CommandType_COMMAND_TYPE_ENQUEUE); n != 0 {
		t.Fatalf("%d enqueue commands proposed for a refused request", n)
	}
	if st, _ := node.FSM().Stats("", ""); len(st) != 0 {
		t.Fatalf("stats after refused enqueue: %v", st)
	}

	// Unknown ids.
	_, err = ts.q.GetTask(ctx, &pb.GetTaskRequest{TaskId: "nope"})
	wantErr(t, err, codes.NotFound, "", "")
	_, err = ts.q.Submit(ctx, &pb.SubmitRequest{TaskId: "nope", Fence: 1, Outcome: pb.Outcome_OUTCOME_COMPLETED})
	wantErr(t, err, codes.NotFound, "", "")

	// Fences and states.
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})
	task := mustClaim(t, ts.q, "q", 1)[0]
	_, err = ts.q.Submit(ctx, &pb.SubmitRequest{TaskId: task.GetId(), Fence: task.GetFence() + 1, Outcome: pb.Outcome_OUTCOME_COMPLETED})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonStaleFence, "")
	_, err = ts.q.Nack(ctx, &pb.NackRequest{TaskId: task.GetId(), Fence: task.GetFence() + 1})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonStaleFence, "")
	_, err = ts.q.Cancel(ctx, &pb.CancelRequest{TaskId: task.GetId()})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonWrongState, "")

	// Submit is a compare-and-set: repeating the winner is already_done.
	req := &pb.SubmitRequest{TaskId: task.GetId(), Fence: task.GetFence(), Outcome: pb.Outcome_OUTCOME_COMPLETED}
	for i, want := range []bool{false, true} {
		resp, err := ts.q.Submit(ctx, req)
		if err != nil || resp.GetAlreadyDone() != want {
			t.Fatalf("submit %d: already_done %v, err %v; want %v", i, resp.GetAlreadyDone(), err, want)
		}
	}

	// Cluster errors from Propose.
	for _, c := range []struct {
		err    error
		code   codes.Code
		reason string
	}{
		{fmt.Errorf("%w: lost", replica.ErrLeadershipLost), codes.Unavailable, pb.ReasonLeadershipLost},
		{replica.ErrShutdown, codes.Unavailable, pb.ReasonShuttingDown},
		{context.DeadlineExceeded, codes.DeadlineExceeded, ""},
		{errBoom, codes.Internal, ""},
	} {
		node.Fail(c.err)
		_, err = ts.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}})
		wantErr(t, err, c.code, c.reason, "")
	}
}

func Test_NoLeaderIsUnavailable(t *testing.T) {
	ts := mustFollower(t, "", Config{})
	_, err := ts.q.Enqueue(testCtx(t), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}})
	wantErr(t, err, codes.Unavailable, pb.ReasonNotLeader, "")
	_, err = ts.q.Stats(testCtx(t), &pb.StatsRequest{})
	wantErr(t, err, codes.Unavailable, pb.ReasonNotLeader, "")
	// A stale read needs no leader.
	_, err = ts.q.GetTask(testCtx(t), &pb.GetTaskRequest{TaskId: "x", AllowStale: true})
	wantErr(t, err, codes.NotFound, "", "")
}

// MaxAnswerBytes holds the largest answer the FSM can make: one task of
// fsm.MaxTaskBytes with its envelope, or fsm.AnswerBudget of tasks.
func Test_MaxAnswerBytesCoversLargestAnswer(t *testing.T) {
	const envelope = 1 << 10 // tags, lengths, applied_index, a cursor
	if fsm.MaxTaskBytes+envelope > MaxAnswerBytes || fsm.AnswerBudget+envelope > MaxAnswerBytes {
		t.Fatalf("MaxAnswerBytes %d < task %d or budget %d + %d", MaxAnswerBytes, fsm.MaxTaskBytes, fsm.AnswerBudget, envelope)
	}
}
