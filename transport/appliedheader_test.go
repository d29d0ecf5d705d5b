package transport

import (
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// A stale read's NotFound must say at which applied index the replica did
// not have the task, so that replicas' answers can be compared (the chaos
// harness's replica-reads checker): GetTask sends the index as a header.
func Test_GetTaskSendsAppliedIndexHeader(t *testing.T) {
	ts := mustLeader(t, Config{})
	ctx := testCtx(t)
	resp, err := ts.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	header := func(md metadata.MD) uint64 {
		t.Helper()
		v := md.Get(pb.MetadataAppliedIndex)
		if len(v) != 1 {
			t.Fatalf("header %s: %v", pb.MetadataAppliedIndex, md)
		}
		n, err := strconv.ParseUint(v[0], 10, 64)
		if err != nil {
			t.Fatalf("header %s: %v", pb.MetadataAppliedIndex, err)
		}
		return n
	}
	var md metadata.MD
	got, err := ts.q.GetTask(ctx, &pb.GetTaskRequest{TaskId: resp.GetItems()[0].GetTaskId(), AllowStale: true}, grpc.Header(&md))
	if err != nil || got.GetAppliedIndex() == 0 {
		t.Fatalf("get: %v, %v", got, err)
	}
	if h := header(md); h != got.GetAppliedIndex() {
		t.Fatalf("header says %d, answer %d", h, got.GetAppliedIndex())
	}
	md = nil
	_, err = ts.q.GetTask(ctx, &pb.GetTaskRequest{TaskId: "nope", AllowStale: true}, grpc.Header(&md))
	if status.Code(err) != codes.NotFound {
		t.Fatalf("get nope: %v", err)
	}
	if h := header(md); h != got.GetAppliedIndex() {
		t.Fatalf("NotFound at %d, want %d", h, got.GetAppliedIndex())
	}
}
