package transport

import (
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Headers are bounded: one header of 1 MiB, or 20,000 small ones, do not
// reach a handler; the ordinary headers of a call (a token, the user
// agent) do.
func Test_RequestHeadersBounded(t *testing.T) {
	ts := mustLeader(t, Config{})
	ctx := testCtx(t)
	if _, err := ts.q.Stats(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.Repeat("a", 43)), &pb.StatsRequest{}); err != nil {
		t.Fatalf("ordinary headers refused: %v", err)
	}
	big := metadata.AppendToOutgoingContext(ctx, "x-big", strings.Repeat("a", 1<<20))
	if _, err := ts.q.Stats(big, &pb.StatsRequest{}); err == nil {
		t.Error("a 1 MiB header was accepted")
	}
	kv := make([]string, 0, 40000)
	for i := 0; i < 20000; i++ {
		kv = append(kv, "x-h", "v")
	}
	many := metadata.AppendToOutgoingContext(ctx, kv...)
	if _, err := ts.q.Stats(many, &pb.StatsRequest{}); err == nil {
		t.Error("20,000 headers were accepted")
	}
	if _, err := ts.q.Stats(ctx, &pb.StatsRequest{}); err != nil {
		t.Fatalf("the connection after refused headers: %v", err)
	}
}
