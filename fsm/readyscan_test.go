package fsm

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// headerOf is the header the full decode gives, to compare with
// decodeOrderHeader's.
func headerOf(t *pb.Task) orderHeader {
	return orderHeader{id: []byte(t.GetId()), queue: []byte(t.GetQueue()), tenant: []byte(t.GetTenant()),
		priority: t.GetPriority(), state: t.GetState(), visibleAt: t.GetVisibleAt(), seq: t.GetSeq(),
		leaseUntil: t.GetLeaseUntil(), deadlineAt: t.GetDeadlineAt(), idemKey: []byte(t.GetIdempotencyKey()),
		expireAt: t.GetExpireAt()}
}

func sameHeader(a, b orderHeader) bool {
	return bytes.Equal(a.id, b.id) && bytes.Equal(a.queue, b.queue) && bytes.Equal(a.tenant, b.tenant) &&
		a.priority == b.priority && a.state == b.state && a.visibleAt == b.visibleAt && a.seq == b.seq &&
		a.leaseUntil == b.leaseUntil && a.deadlineAt == b.deadlineAt && bytes.Equal(a.idemKey, b.idemKey) &&
		a.expireAt == b.expireAt
}

// Test_OrderHeaderReadsWhatUnmarshalReads: for records of every format,
// with every field set and fields the header skips around the ones it
// reads, the in-place header equals what the full decode gives.
func Test_OrderHeaderReadsWhatUnmarshalReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261129, 1))
	str := func() string {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = 'a' + byte(rng.IntN(26))
		}
		return string(b)
	}
	states := []pb.TaskState{pb.TaskState_TASK_STATE_PENDING, pb.TaskState_TASK_STATE_DELAYED,
		pb.TaskState_TASK_STATE_RUNNING, pb.TaskState_TASK_STATE_UNSPECIFIED, pb.TaskState(99)}
	for i := range 2000 {
		task := &pb.Task{
			Id: TaskID(rng.Uint64N(1<<40), rng.IntN(100)), Queue: str(), Tenant: str(), Payload: []byte(str()),
			Priority: uint32(rng.IntN(10)), State: states[rng.IntN(len(states))], Attempts: rng.Uint32(),
			IdempotencyKey: str(), CreatedAt: rng.Int64(), VisibleAt: rng.Int64() - rng.Int64(), Seq: rng.Uint64(),
			Fence: rng.Uint64(), WorkerId: str(), Progress: []byte(str()), Result: []byte(str()), LastError: str(),
			History: []*pb.Attempt{{WorkerId: str(), Fence: rng.Uint64()}}, Schedule: str(), Parents: []string{str(), str()},
			LeaseUntil: rng.Int64() - rng.Int64(), DeadlineAt: rng.Int64(), ExpireAt: rng.Int64() - rng.Int64(),
		}
		enc, err := proto.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		// A field set twice: proto takes the last; so must the header.
		if i%3 == 0 {
			task.Seq = rng.Uint64()
			enc = protowire.AppendVarint(protowire.AppendTag(enc, fieldTaskSeq, protowire.VarintType), task.Seq)
		}
		// A known number with a foreign wire type is an unknown field.
		if i%5 == 0 {
			enc = protowire.AppendFixed64(protowire.AppendTag(enc, fieldTaskState, protowire.Fixed64Type), 7)
		}
		for _, format := range []storage.RecordFormat{storage.FormatInline, storage.FormatSplit, storage.FormatSplitEmpty} {
			v := enc
			if format != storage.FormatInline {
				v = append([]byte{0, byte(format)}, enc...)
			}
			full, _, err := storage.DecodeTaskRecord(v)
			if err != nil {
				t.Fatal(err)
			}
			var h orderHeader
			if err := decodeOrderHeader(v, &h); err != nil {
				t.Fatalf("record %d format %d: %v", i, format, err)
			}
			if want := headerOf(full); !sameHeader(h, want) {
				t.Fatalf("record %d format %d: header %+v, full decode %+v", i, format, h, want)
			}
		}
	}
	var h orderHeader
	for _, bad := range [][]byte{{0, 9, 8, 1}, {0x0a, 5, 'a'}, {0xff}} {
		if err := decodeOrderHeader(bad, &h); err == nil {
			t.Errorf("decodeOrderHeader(%x) = nil, want an error", bad)
		}
	}
}

// FuzzOrderHeader: whatever bytes the full decode accepts, the header
// decode accepts too and reads the same fields.
func FuzzOrderHeader(f *testing.F) {
	for _, task := range []*pb.Task{
		{Id: TaskID(7, 1), Queue: "q", Tenant: "t", Priority: 3, State: pb.TaskState_TASK_STATE_PENDING, Seq: 9},
		{Id: TaskID(7, 2), Queue: "q", State: pb.TaskState_TASK_STATE_COMPLETED, IdempotencyKey: "order-7", ExpireAt: 1 << 43},
		{Id: TaskID(8, 0), Queue: "q", State: pb.TaskState_TASK_STATE_DELAYED, VisibleAt: 1 << 40, Payload: []byte("x")},
		{Id: TaskID(9, 2), Queue: "q", State: pb.TaskState_TASK_STATE_RUNNING, Fence: 9, LeaseUntil: 1 << 41, DeadlineAt: 1 << 42},
	} {
		enc, err := proto.Marshal(task)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
		f.Add(append([]byte{0, byte(storage.FormatSplit)}, enc...))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		full, _, err := storage.DecodeTaskRecord(v)
		var h orderHeader
		herr := decodeOrderHeader(v, &h)
		if err != nil {
			return // the header may read what the full decode refuses (UTF-8 it does not check)
		}
		if herr != nil {
			t.Fatalf("full decode took %x, the header refused it: %v", v, herr)
		}
		if want := headerOf(full); !sameHeader(h, want) {
			t.Fatalf("%x: header %+v, full decode %+v", v, h, want)
		}
	})
}
