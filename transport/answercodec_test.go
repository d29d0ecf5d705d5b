package transport

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// answerTask is a claimed task as an answer carries it, with a payload of
// n bytes (long enough, from 128 on, for a two-byte length).
func answerTask(i, n int) *pb.Task {
	return &pb.Task{
		Id: fmt.Sprintf("t%06d", i), Queue: "jobs", Tenant: "acme", Payload: bytes.Repeat([]byte{byte(i)}, n),
		State: pb.TaskState_TASK_STATE_RUNNING, Attempts: 1, MaxAttempts: 3, CreatedAt: -int64(i),
		Fence: uint64(1000 + i), WorkerId: strings.Repeat("w", i%200), LeaseNs: 30e9, LeaseUntil: 1 << 40,
		History: []*pb.Attempt{{Claim: 1, Fence: uint64(i)}}, Retry: &pb.RetryPolicy{},
	}
}

// Test_ClaimAnswerCodecIsProtos holds the hand-encoded claim answers to
// proto's bytes: empty answers, empty items, large payloads and answers
// past gRPC's pooling threshold, and messages with unknown fields, which
// the base codec encodes.
func Test_ClaimAnswerCodecIsProtos(t *testing.T) {
	var many []*pb.Task
	for i := range 300 {
		many = append(many, answerTask(i, 128))
	}
	odd := answerTask(7, 3)
	odd.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 1))
	unknownItem := &pb.ClaimResponse{Tasks: many[:2]}
	unknownItem.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 77, protowire.VarintType), 1))
	cases := []proto.Message{
		&pb.ClaimResponse{},
		&pb.ClaimResponse{Tasks: many[:1]},
		&pb.ClaimResponse{Tasks: []*pb.Task{answerTask(1, 0), answerTask(2, 70000)}},
		&pb.ClaimResponse{Tasks: many},
		&pb.ClaimResponse{Tasks: []*pb.Task{many[0], odd}},
		&pb.ClaimBatchResponse{},
		&pb.ClaimBatchResponse{Items: []*pb.ClaimResponse{{}, {Tasks: many[:3]}, {}}},
		&pb.ClaimBatchResponse{Items: []*pb.ClaimResponse{{Tasks: many[:100]}, {Tasks: many[100:]}}},
		&pb.ClaimBatchResponse{Items: []*pb.ClaimResponse{{Tasks: []*pb.Task{odd}}, unknownItem}},
	}
	c := newRequestCodec()
	for _, m := range []proto.Message{
		&pb.ClaimResponse{Tasks: []*pb.Task{many[0], nil}},
		&pb.ClaimBatchResponse{Items: []*pb.ClaimResponse{{Tasks: many[:1]}, nil}},
		&pb.ClaimBatchResponse{Items: []*pb.ClaimResponse{{Tasks: []*pb.Task{nil}}}},
	} {
		_, werr := proto.Marshal(m)
		data, err := c.Marshal(m)
		if (err != nil) != (werr != nil) {
			t.Fatalf("%v with a nil element: the codec says %v, proto %v", m, err, werr)
		}
		if err == nil {
			data.Free()
		}
	}
	for i, m := range cases {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		data, err := c.Marshal(m)
		if err != nil {
			t.Fatalf("case %d: Marshal: %v", i, err)
		}
		got := data.Materialize()
		data.Free()
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d (%T): the codec wrote %d bytes, proto %d; not the same", i, m, len(got), len(want))
		}
		back := m.ProtoReflect().New().Interface()
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(got)}, back); err != nil || !proto.Equal(back, m) {
			t.Fatalf("case %d: what the codec wrote reads back as %v (%v)", i, back, err)
		}
	}
}
