package taskwire

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// fullTask sets every field of a Task, its history's and its retry
// policy's, to a value that is not zero.
func fullTask() *pb.Task {
	return &pb.Task{
		Id: "01J9Z3T6Q8", Queue: "jobs", Tenant: "acme", Payload: []byte("body"), Priority: 7,
		State: pb.TaskState_TASK_STATE_RUNNING, Attempts: 2, MaxAttempts: 5, IdempotencyKey: "k-1",
		RetentionNs: 86_400e9, CreatedAt: 1_764_000_000e9, VisibleAt: 1_764_000_001e9, Seq: 1 << 40,
		Fence: 123_456, WorkerId: "w-9", LeaseNs: 30e9, LeaseUntil: -1, ClaimedAt: 1_764_000_002e9,
		Progress: []byte{0, 1}, Outcome: pb.Outcome_OUTCOME_FAILED, Result: []byte("r"),
		LastError: "boom", FinishedAt: 1, ExpireAt: 2, Claims: 3,
		History: []*pb.Attempt{{
			Claim: 1, WorkerId: "w-1", Fence: 9, ClaimedAt: 4, LeaseUntil: 5, EndedAt: 6,
			Outcome: pb.AttemptOutcome_ATTEMPT_OUTCOME_NACKED, Error: strings.Repeat("e", 300),
			CancelRequestedAt: 7, DeadlineAt: -8,
		}},
		Schedule: "nightly", ScheduleSlot: 10, CancelRequested: true, TimeoutNs: 11, DeadlineAt: 12,
		RetryOnTimeout: true, CancelRequestedAt: 13, Parents: []string{"a", ""}, Waiting: 1,
		OnParentFailure: pb.ParentFailurePolicy(-2), Children: 4,
		Retry: &pb.RetryPolicy{BaseNs: 1, CapNs: 2, Multiplier: 3, JitterPercent: 4},
		Key:   []byte("tenant-7"),
	}
}

// Test_TaskCodecKnowsEveryField fails when task.proto gains a field that
// the hand codec (taskwire.go) does not write and read: fullTask must set
// it, and the round trip below then shows whether the codec keeps it.
func Test_TaskCodecKnowsEveryField(t *testing.T) {
	task := fullTask()
	var unset func(m protoreflect.Message)
	unset = func(m protoreflect.Message) {
		fields := m.Descriptor().Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			if !m.Has(fd) {
				t.Errorf("%s is not set by fullTask: teach taskwire.go the field, then set it here", fd.FullName())
				continue
			}
			switch {
			case fd.IsList() && fd.Message() != nil:
				for j := 0; j < m.Get(fd).List().Len(); j++ {
					unset(m.Get(fd).List().Get(j).Message())
				}
			case fd.Message() != nil:
				unset(m.Get(fd).Message())
			}
		}
	}
	unset(task.ProtoReflect())
	checkTaskCodec(t, task)
}

// checkTaskCodec holds the hand codec to proto's for one task: the same
// bytes as a deterministic marshal, and the same task back.
func checkTaskCodec(t *testing.T, task *pb.Task) {
	t.Helper()
	want, err := marshal.Marshal(task)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	got, err := Append(nil, task)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Append wrote\n%x\nproto writes\n%x", got, want)
	}
	checkTaskSize(t, task)
	var back pb.Task
	if !decodeTaskFast(want, &back) {
		t.Fatalf("decodeTaskFast refused what proto wrote: %x", want)
	}
	if !proto.Equal(&back, task) {
		t.Fatalf("decodeTaskFast read\n%v\nwant\n%v", &back, task)
	}
}

// randomTask sets each field or leaves it zero at random, with values at
// the edges of their varints: negatives, the largest, lengths past 127.
func randomTask(r *rand.Rand) *pb.Task {
	i64 := func() int64 {
		switch r.IntN(5) {
		case 0:
			return 0
		case 1:
			return -r.Int64()
		case 2:
			return math.MaxInt64
		case 3:
			return math.MinInt64
		}
		return r.Int64N(1 << uint(r.IntN(62)+1))
	}
	u32 := func() uint32 { return uint32(i64()) }
	str := func() string {
		if r.IntN(3) == 0 {
			return ""
		}
		return strings.Repeat("é", r.IntN(200))
	}
	raw := func() []byte {
		if r.IntN(3) == 0 {
			return nil
		}
		b := make([]byte, r.IntN(300))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	}
	t := &pb.Task{
		Id: str(), Queue: str(), Tenant: str(), Payload: raw(), Priority: u32(),
		State: pb.TaskState(int32(i64())), Attempts: u32(), MaxAttempts: u32(), IdempotencyKey: str(),
		RetentionNs: i64(), CreatedAt: i64(), VisibleAt: i64(), Seq: uint64(i64()), Fence: uint64(i64()),
		WorkerId: str(), LeaseNs: i64(), LeaseUntil: i64(), ClaimedAt: i64(), Progress: raw(),
		Outcome: pb.Outcome(int32(i64())), Result: raw(), LastError: str(), FinishedAt: i64(),
		ExpireAt: i64(), Claims: u32(), Schedule: str(), ScheduleSlot: i64(), CancelRequested: r.IntN(2) == 0,
		TimeoutNs: i64(), DeadlineAt: i64(), RetryOnTimeout: r.IntN(2) == 0, CancelRequestedAt: i64(),
		Waiting: u32(), OnParentFailure: pb.ParentFailurePolicy(int32(i64())), Children: u32(), Key: raw(),
	}
	for range r.IntN(4) {
		t.Parents = append(t.Parents, str())
	}
	for range r.IntN(18) {
		t.History = append(t.History, &pb.Attempt{
			Claim: u32(), WorkerId: str(), Fence: uint64(i64()), ClaimedAt: i64(), LeaseUntil: i64(),
			EndedAt: i64(), Outcome: pb.AttemptOutcome(int32(i64())), Error: str(),
			CancelRequestedAt: i64(), DeadlineAt: i64(),
		})
	}
	if r.IntN(2) == 0 {
		t.Retry = &pb.RetryPolicy{BaseNs: i64(), CapNs: i64(), Multiplier: u32(), JitterPercent: u32()}
	}
	return t
}

func Test_TaskCodecMatchesProto(t *testing.T) {
	r := rand.New(rand.NewPCG(20261129, 1))
	for i := 0; i < 2000; i++ {
		checkTaskCodec(t, randomTask(r))
	}
	checkTaskCodec(t, &pb.Task{})
	checkTaskCodec(t, &pb.Task{Retry: &pb.RetryPolicy{}, History: []*pb.Attempt{{}}})
}

// Test_TaskCodecLeavesTheOddToProto covers what the fast paths hand on:
// a newer build's unknown fields, kept and written back, and encodings
// proto decides about.
func Test_TaskCodecLeavesTheOddToProto(t *testing.T) {
	base, err := marshal.Marshal(fullTask())
	if err != nil {
		t.Fatal(err)
	}
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 5)
	nested := append([]byte(nil), base...)
	nested = protowire.AppendBytes(protowire.AppendTag(nested, tfHistory, protowire.BytesType), unknown)
	for _, tc := range []struct {
		name    string
		v       []byte
		wantErr bool
	}{
		{"unknown field", append(append([]byte(nil), base...), unknown...), false},
		{"unknown field in an attempt", nested, false},
		{"a known field in another wire type", append(protowire.AppendTag(nil, tfPriority, protowire.Fixed32Type), 1, 0, 0, 0), false},
		{"invalid UTF-8", protowire.AppendBytes(protowire.AppendTag(nil, tfQueue, protowire.BytesType), []byte{0xff}), true},
		{"truncated", base[:len(base)-1], true},
		{"field number 0", []byte{0, 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fast pb.Task
			if decodeTaskFast(tc.v, &fast) {
				t.Fatalf("decodeTaskFast took %x", tc.v)
			}
			var want, got pb.Task
			werr := proto.Unmarshal(tc.v, &want)
			if (werr != nil) != tc.wantErr {
				t.Fatalf("proto.Unmarshal: %v, want error %v", werr, tc.wantErr)
			}
			gerr := Decode(tc.v, &got)
			if (gerr != nil) != (werr != nil) || !proto.Equal(&got, &want) {
				t.Fatalf("Decode = %v, %v; proto %v, %v", &got, gerr, &want, werr)
			}
			if werr != nil {
				return
			}
			checkEncodeLikeProto(t, &want)
		})
	}
}

func checkEncodeLikeProto(t *testing.T, task *pb.Task) {
	t.Helper()
	want, err := marshal.Marshal(task)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	got, err := Append(nil, task)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Append = %x, %v; proto writes %x", got, err, want)
	}
	checkTaskSize(t, task)
}

// checkTaskSize holds Size to proto.Size: tenant usage is replicated
// state, so a byte off is a divergence between builds.
func checkTaskSize(t *testing.T, task *pb.Task) {
	t.Helper()
	if got, want := Size(task), proto.Size(task); got != want {
		t.Fatalf("Size = %d; proto.Size = %d for %v", got, want, task)
	}
}

// FuzzTaskCodec holds the hand codec to proto on any bytes: what the fast
// decoder takes proto takes too, with the same task; Decode answers
// as proto.Unmarshal does; and a decoded task encodes as proto encodes it.
func FuzzTaskCodec(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, task := range []*pb.Task{fullTask(), {}, randomTask(r), randomTask(r)} {
		v, err := marshal.Marshal(task)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v)
	}
	f.Add([]byte{0x32, 0x01, 0xff})
	f.Add(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 5))
	f.Fuzz(func(t *testing.T, v []byte) {
		var want pb.Task
		werr := proto.Unmarshal(v, &want)
		var fast pb.Task
		if decodeTaskFast(v, &fast) {
			if werr != nil {
				t.Fatalf("decodeTaskFast took %x; proto refuses it: %v", v, werr)
			}
			if !proto.Equal(&fast, &want) {
				t.Fatalf("decodeTaskFast read %v; proto %v", &fast, &want)
			}
		}
		var got pb.Task
		gerr := Decode(v, &got)
		if (gerr != nil) != (werr != nil) {
			t.Fatalf("Decode error %v; proto %v", gerr, werr)
		}
		if werr != nil {
			return
		}
		if !proto.Equal(&got, &want) {
			t.Fatalf("Decode read %v; proto %v", &got, &want)
		}
		if c := Clone(&got); !proto.Equal(c, &want) {
			t.Fatalf("Clone of %v is %v", &want, c)
		}
		checkEncodeLikeProto(t, &want)
	})
}

func BenchmarkTaskCodec(b *testing.B) {
	task := fullTask()
	task.Payload, task.Result, task.Progress = nil, nil, nil
	task.History[0].Error = ""
	v, err := marshal.Marshal(task)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode/proto", func(b *testing.B) {
		for b.Loop() {
			if _, err := marshal.MarshalAppend([]byte{0, 1}, task); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/hand", func(b *testing.B) {
		buf := make([]byte, 0, 512) // as PutTaskSplit reuses its buffers
		for b.Loop() {
			if _, err := Append(buf[:0], task); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/proto", func(b *testing.B) {
		for b.Loop() {
			if err := proto.Unmarshal(v, &pb.Task{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/hand", func(b *testing.B) {
		for b.Loop() {
			if err := Decode(v, &pb.Task{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
