package transport

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// A request that says it was forwarded is checked on the leader all the
// same: the mark is a header any client can set, and a request that skipped
// the check would cost a replicated entry before the FSM refused it, or be
// stored past this node's own limits (the FSM holds only the ceiling).
func Test_ForwardedMarkDoesNotSkipTheCheck(t *testing.T) {
	node := newMemNode(t, true, service.ServiceConfig{})
	node.SetLimits(fsm.Limits{MaxPayload: 1024})
	ts := mustServe(t, node, "", Config{})
	ctx := metadata.AppendToOutgoingContext(testCtx(t), pb.MetadataForwarded, "1")
	_, err := ts.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Payload: make([]byte, 4096)}}})
	wantErr(t, err, codes.ResourceExhausted, "", "tasks[0].payload")
	if n := node.Runs(pb.CommandType_COMMAND_TYPE_ENQUEUE); n != 0 {
		t.Fatalf("%d Enqueue commands proposed for a refused request", n)
	}
}

// A run_at beyond the furthest delay is refused where the request arrives,
// judged by that node's clock, before it costs a Raft entry.
func Test_FarRunAtRefusedBeforeProposing(t *testing.T) {
	ts := mustLeader(t, Config{})
	far := time.Now().Add(fsm.MaxDelay + time.Hour).UnixNano()
	_, err := ts.q.Enqueue(testCtx(t), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", RunAt: far}}})
	wantErr(t, err, codes.InvalidArgument, "", "tasks[0].run_at")
	if n := ts.node.Runs(pb.CommandType_COMMAND_TYPE_ENQUEUE); n != 0 {
		t.Fatalf("%d Enqueue commands proposed for a refused run_at", n)
	}
}
