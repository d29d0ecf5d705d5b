package transport

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// rawCodec sends hand-built bytes as they are, so a test can put on the
// wire what no protobuf library would marshal.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// field appends field num as length-delimited bytes.
func field(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

// Test_UndecodableRequestIsInvalidArgument: a request whose string field
// holds invalid UTF-8 (which gRPC refuses while decoding, before any
// interceptor) or whose bytes are not protobuf at all is the caller's
// fault: InvalidArgument, on a leader, through a follower, and on a
// stream, never Internal.
func Test_UndecodableRequestIsInvalidArgument(t *testing.T) {
	leader := mustLeader(t, Config{})
	follower := mustFollower(t, leader.addr, Config{})
	ctx := testCtx(t)

	badQueue := field(nil, 1, field(nil, 1, []byte{0xff})) // EnqueueRequest{tasks: [{queue: "\xff"}]}
	badClaim := field(nil, 1, []byte("q\xff"))             // ClaimRequest{queue: "q\xff"}
	truncated := []byte{0x0a, 0x05, 0x01}                  // a field longer than the message
	cases := []struct {
		name   string
		cc     *grpc.ClientConn
		method string
		req    []byte
	}{
		{"enqueue invalid utf-8", leader.cc, pb.Queue_Enqueue_FullMethodName, badQueue},
		{"claim invalid utf-8", leader.cc, pb.Queue_Claim_FullMethodName, badClaim},
		{"enqueue via follower", follower.cc, pb.Queue_Enqueue_FullMethodName, badQueue},
		{"truncated", leader.cc, pb.Queue_Enqueue_FullMethodName, truncated},
		{"health check", leader.cc, healthpb.Health_Check_FullMethodName, field(nil, 1, []byte{0xff})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out []byte
			err := c.cc.Invoke(ctx, c.method, &c.req, &out, grpc.ForceCodec(rawCodec{}))
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
		})
	}
	if n := leader.node.Proposed(pb.CommandType_COMMAND_TYPE_ENQUEUE); n != 0 {
		t.Fatalf("%d enqueues proposed for undecodable requests", n)
	}

	// A server stream (health Watch) answers the same.
	stream, err := leader.cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, healthpb.Health_Watch_FullMethodName,
		grpc.ForceCodec(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	req := field(nil, 1, []byte{0xff})
	if err := stream.SendMsg(&req); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var out []byte
	if err := stream.RecvMsg(&out); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("watch: got %v, want InvalidArgument", err)
	}

	// A good request on the same connection still works.
	mustEnqueue(t, leader.q, &pb.NewTask{Queue: "q"})
}
