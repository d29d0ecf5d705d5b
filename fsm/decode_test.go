package fsm

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// dataPathCommands are the data path's commands with every field the hand
// decoder takes set, at the edges of their types: encoded, for the fuzz
// corpus and the tests below.
func dataPathCommands(t testing.TB) [][]byte {
	now := at(time.Hour)
	full := &pb.NewTask{
		Queue: "emails", Tenant: "acme", Payload: []byte{0, 1, 2}, Priority: 9, RunAt: -5,
		DelayNs: math.MaxInt64, MaxAttempts: math.MaxUint32, IdempotencyKey: "019b-é-key",
		RetentionNs: math.MinInt64, TimeoutNs: 1, RetryOnTimeout: true,
		OnParentFailure: pb.ParentFailurePolicy(-3), Key: []byte("customer-7"),
	}
	enqueue := enqueueCmd(now, full, nt("reports", "", 0), &pb.NewTask{})
	enqueue.GetEnqueue().Limits = &pb.TenantLimits{MaxTasks: math.MaxUint64, MaxBytes: 1}
	submit := submitCmd(now, "t-1", math.MaxUint64, pb.Outcome(77), "it broke")
	submit.GetSubmit().Result, submit.GetSubmit().Tenant = []byte("ok"), "acme"
	nack := nackCmd(now, "t-2", 3, -time.Second, "later")
	nack.GetNack().Tenant = "acme"
	cmds := []*pb.Command{
		enqueue,
		claimCmd(-now, "emails", "acme", "worker-ü", math.MinInt64, math.MaxUint32),
		heartbeatCmd(now, &pb.HeartbeatItem{TaskId: "t-1", Fence: 9, Progress: []byte("1/2"), HasProgress: true, LeaseNs: -1, Tenant: "acme"}, &pb.HeartbeatItem{}),
		submit,
		nack,
		{Type: pb.CommandType(-1), Now: math.MinInt64},
		{Type: pb.CommandType_COMMAND_TYPE_BATCH, Now: now, Body: &pb.Command_Batch{Batch: &pb.BatchCmd{
			Commands: []*pb.Command{enqueue, submit, nack, {}, claimCmd(now, "q", "", "w", 0, 1)},
		}}},
	}
	var out [][]byte
	for _, c := range cmds {
		b, err := EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// Test_DecodeFastTakesTheDataPath: the data path's commands, every field
// set, are decoded by hand, to what proto decodes.
func Test_DecodeFastTakesTheDataPath(t *testing.T) {
	for i, b := range dataPathCommands(t) {
		fast, ok := decodeFast(b)
		if !ok {
			t.Fatalf("command %d went to proto", i)
		}
		slow := &pb.Command{}
		if err := proto.Unmarshal(b, slow); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(fast, slow) {
			t.Fatalf("command %d: the hand decoder read %v, proto %v", i, fast, slow)
		}
	}
}

// Test_DecodeFastLeavesTheRestToProto: shapes whose meaning is proto's
// (other types, unknown or repeated fields, bad UTF-8, bad bytes) are
// not decoded by hand, and DecodeCommand answers them as proto does.
func Test_DecodeFastLeavesTheRestToProto(t *testing.T) {
	tag := func(b []byte, num protowire.Number, typ protowire.Type) []byte {
		return protowire.AppendTag(b, num, typ)
	}
	msg := func(b []byte, num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(tag(b, num, protowire.BytesType), v)
	}
	enc := func(c *pb.Command) []byte {
		b, err := EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	now := at(time.Hour)
	claim := enc(claimCmd(now, "q", "", "w", 0, 1))
	retry := enqueueCmd(now, nt("q", "", 0))
	retry.GetEnqueue().GetTasks()[0].Retry = &pb.RetryPolicy{BaseNs: 1}
	after := enqueueCmd(now, nt("q", "", 0))
	after.GetEnqueue().GetTasks()[0].After, after.GetEnqueue().GetTasks()[0].AfterIndex = []string{"p"}, []uint32{1, 2}
	limits := msg(nil, 2, protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 5))
	cases := []struct {
		name    string
		data    []byte
		decodes bool // proto decodes it
	}{
		{"a cancel", enc(cancelCmd(now, "t-1")), true},
		{"a task with a retry policy", enc(retry), true},
		{"a task with parents", enc(after), true},
		{"an unknown field", protowire.AppendVarint(tag(bytes.Clone(claim), 99, protowire.VarintType), 1), true},
		{"an unknown field of a claim", msg(nil, 11, protowire.AppendVarint(tag(nil, 9, protowire.VarintType), 1)), true},
		{"a field of another wire type", protowire.AppendBytes(tag(nil, 1, protowire.BytesType), []byte("x")), true},
		{"two bodies", msg(bytes.Clone(claim), 13, nil), true},
		{"the same body twice", msg(bytes.Clone(claim), 11, protowire.AppendVarint(tag(nil, 5, protowire.VarintType), 3)), true},
		{"limits twice", msg(nil, 10, append(bytes.Clone(limits), limits...)), true},
		{"a batch in a batch", msg(nil, 20, msg(nil, 1, msg(nil, 20, nil))), true},
		{"a fixed64 field", protowire.AppendFixed64(tag(nil, 2, protowire.Fixed64Type), 1), true},
		{"a queue that is not UTF-8", msg(nil, 11, msg(nil, 1, []byte{0xff, 0xfe})), false},
		{"a truncated varint", []byte{0x10, 0xff}, false},
		{"a length past the end", []byte{0x5a, 0x09, 0x0a}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, ok := decodeFast(c.data); ok {
				t.Fatal("the hand decoder took it")
			}
			slow := &pb.Command{}
			perr := proto.Unmarshal(c.data, slow)
			if (perr == nil) != c.decodes {
				t.Fatalf("proto's error %v, want decodes=%v", perr, c.decodes)
			}
			got, err := DecodeCommand(c.data)
			switch {
			case perr != nil:
				if !errors.Is(err, ErrDecode) {
					t.Fatalf("DecodeCommand: %v, want ErrDecode", err)
				}
			case err == nil && !proto.Equal(got, slow):
				t.Fatalf("DecodeCommand read %v, proto %v", got, slow)
			}
		})
	}
}

// BenchmarkDecodeCommand: a node's decode of the data path's entries.
func BenchmarkDecodeCommand(b *testing.B) {
	now := at(time.Hour)
	tasks := make([]*pb.NewTask, 100)
	for i := range tasks {
		tasks[i] = nt("bench", "t", 0)
		tasks[i].IdempotencyKey = "019bd3f2-7c1e-7a4b-9f00-0123456789ab"
	}
	subs := make([]*pb.Command, 100)
	for i := range subs {
		subs[i] = completeCmd(now, TaskID(uint64(1000+i), 0), uint64(900+i))
	}
	for _, c := range []struct {
		name string
		cmd  *pb.Command
	}{
		{"enqueue=100", enqueueCmd(now, tasks...)},
		{"submits=100", &pb.Command{Type: pb.CommandType_COMMAND_TYPE_BATCH, Now: now, Body: &pb.Command_Batch{Batch: &pb.BatchCmd{Commands: subs}}}},
	} {
		data, err := EncodeCommand(c.cmd)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/proto", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := proto.Unmarshal(data, &pb.Command{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/hand", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := decodeFast(data); !ok {
					b.Fatal("went to proto")
				}
			}
		})
	}
}
