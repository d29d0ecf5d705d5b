package fsm

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// seedCommands are valid commands of every type, plus a few that Validate
// refuses, to start each fuzz corpus. ids and fences name tasks of the
// FuzzApply prefix so that mutations can hit live tasks.
func seedCommands(t testing.TB, p *fuzzPrefix) [][]byte {
	now := at(time.Hour)
	keyed := nt("emails", "acme", 7)
	keyed.IdempotencyKey, keyed.DelayNs, keyed.MaxAttempts, keyed.RetentionNs = "k-1", int64(time.Second), 2, int64(time.Minute)
	cmds := []*pb.Command{
		enqueueCmd(now, nt("emails", "acme", 0), keyed, &pb.NewTask{Queue: "reports", Tenant: "beta", RunAt: now + 5}),
		claimCmd(now, "emails", "acme", "worker-1", lease, 3),
		heartbeatCmd(now, &pb.HeartbeatItem{TaskId: p.running.id, Fence: p.running.fence, Progress: []byte("1/2"), HasProgress: true, LeaseNs: int64(time.Minute)}),
		completeCmd(now, p.running.id, p.running.fence),
		submitCmd(now, p.running.id, p.running.fence, pb.Outcome_OUTCOME_FAILED, "bad input"),
		nackCmd(now, p.running.id, p.running.fence, 3*time.Second, "retry later"),
		cancelCmd(now, p.pending),
		reapCmd(now, &pb.ReapItem{TaskId: p.running.id, Fence: p.running.fence}),
		promoteCmd(now, 100),
		purgeCmd(now+int64(48*time.Hour), 100),
		requeueDeadCmd(now, p.dead, "", "", 0),
		requeueDeadCmd(now, "", "emails", "acme", 10),
		setPausedCmd(now, "emails", "acme", true),
		setPausedCmd(now, "emails", "acme", false),
		purgeQueueCmd(now, "emails", "acme", false, 10),
		purgeQueueCmd(now, "emails", "acme", true, 10),
		putScheduleCmd(now, &pb.Schedule{Name: "nightly", Tenant: "acme", Queue: "emails", Spec: "0 3 * * *", Zone: "Europe/Berlin",
			Payload: []byte("digest"), Missed: pb.MissedPolicy_MISSED_POLICY_CATCH_UP, CatchupMax: 3}),
		putScheduleCmd(now, &pb.Schedule{Name: "tick", Tenant: "acme", Queue: "emails", Spec: "@every 1s"}),
		fireCmd(now, "acme", "tick", now-now%int64(time.Second)),
		fireCmd(now, "acme", "tick", now+1),
		removeScheduleCmd(now, "acme", "nightly"),
		setRetryCmd(now, "emails", "acme", &pb.RetryPolicy{BaseNs: int64(time.Second), CapNs: int64(time.Minute), Multiplier: 2, JitterPercent: 20}),
		setDeadRetentionCmd(now, "emails", "acme", time.Hour),
		resetQueueCmd(now, "emails", "acme"),
		snoozeCmd(now, p.running.id, p.running.fence, 30*time.Second),
		updateTaskCmd(now, p.pending, 8, now+int64(time.Minute)),
		updateTaskCmd(now, p.running.id, 1, 0), // WRONG_STATE
		cancelCmd(now, p.running.id),           // a cancel request once level 9 is latched
		timeOutCmd(now, &pb.ReapItem{TaskId: p.running.id, Fence: p.running.fence}),
		enqueueCmd(now, &pb.NewTask{Queue: "emails", Tenant: "acme", TimeoutNs: int64(time.Minute), RetryOnTimeout: true}),
		limitsCmd(now, "emails", "acme", u32(2), u64(1500), u32(3)),
		limitsCmd(now, "emails", "acme", nil, u64(0), nil),
		limitsCmd(now, "", "acme", u32(1), nil, nil),
		claimCmd(now, "emails", "acme", "", 0, 0),            // invalid
		{Type: pb.CommandType_COMMAND_TYPE_SUBMIT, Now: now}, // no body
		{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE, Now: now - int64(time.Hour), // time runs backwards
			Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: []*pb.NewTask{nt("video.encode", "beta", 9)}}}},
	}
	cmds = append(cmds, depsSeeds(now, p)...)
	out := make([][]byte, len(cmds))
	for i, c := range cmds {
		out[i] = mustEncode(t, c)
	}
	return out
}

// fuzzPrefix is a short seeded workload that every FuzzApply input runs
// after, with a few of its tasks by state.
type fuzzPrefix struct {
	logs    []*raft.Log
	running claimRef
	pending string
	dead    string
}

var (
	prefixOnce sync.Once
	prefix     *fuzzPrefix
)

func getPrefix(t testing.TB) *fuzzPrefix {
	prefixOnce.Do(func() {
		// The first seed whose short log leaves a running, a pending and a
		// dead task: a deterministic search.
		for seed := uint64(1); seed < 100 && prefix == nil; seed++ {
			prefix = tryPrefix(t, seed)
		}
	})
	if prefix == nil {
		t.Fatal("no fuzz prefix")
	}
	return prefix
}

func tryPrefix(t testing.TB, seed uint64) *fuzzPrefix {
	f, err := Open(t.TempDir(), Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := &fuzzPrefix{}
	p.logs, _ = generate(t, f, seed, 150, nil)
	for _, q := range newWorkload(0).queues {
		for _, state := range []pb.TaskState{pb.TaskState_TASK_STATE_RUNNING, pb.TaskState_TASK_STATE_PENDING, pb.TaskState_TASK_STATE_DEAD} {
			tasks, _, err := f.ListTasks(q.Queue, q.Tenant, state, "", 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(tasks) == 0 {
				continue
			}
			switch state {
			case pb.TaskState_TASK_STATE_RUNNING:
				p.running = claimRef{tasks[0].GetId(), tasks[0].GetFence()}
			case pb.TaskState_TASK_STATE_PENDING:
				p.pending = tasks[0].GetId()
			default:
				p.dead = tasks[0].GetId()
			}
		}
	}
	if p.running.id == "" || p.pending == "" || p.dead == "" {
		return nil
	}
	return p
}

// memFSM is a fresh FSM on an in-memory filesystem.
func memFSM(t testing.TB) *FSM {
	return mustOpen(t, "/fsm", Options{FS: vfs.NewMem()})
}

// FuzzDecodeCommand: DecodeCommand never panics, fails only with its two
// sentinels, and what it accepts survives an encode/decode round trip.
// The hand decoder of the data path (decodeFast) takes only what proto
// takes, and decodes it to what proto does.
func FuzzDecodeCommand(f *testing.F) {
	for _, b := range seedCommands(f, getPrefix(f)) {
		f.Add(b)
	}
	for _, b := range dataPathCommands(f) {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x08, 0x63}) // type 99
	f.Fuzz(func(t *testing.T, data []byte) {
		if fast, ok := decodeFast(data); ok {
			slow := &pb.Command{}
			if err := proto.Unmarshal(data, slow); err != nil {
				t.Fatalf("the hand decoder took what proto refuses: %v", err)
			}
			if !proto.Equal(fast, slow) {
				t.Fatalf("the hand decoder read %v, proto %v", fast, slow)
			}
		}
		cmd, err := DecodeCommand(data)
		if err != nil {
			if !errors.Is(err, ErrDecode) && !errors.Is(err, ErrUnknownCommand) {
				t.Fatalf("error wraps neither sentinel: %v", err)
			}
			return
		}
		b, err := EncodeCommand(cmd)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := DecodeCommand(b)
		if err != nil || !proto.Equal(cmd, again) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzValidate: Validate never panics and refuses only with a FieldError;
// a command it accepts at the edge is accepted by the FSM too, and applies
// to a fresh FSM without panic and without a whole-command rejection.
func FuzzValidate(f *testing.F) {
	for _, b := range seedCommands(f, getPrefix(f)) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := DecodeCommand(data)
		if err != nil {
			return
		}
		if err := Validate(cmd, DefaultLimits()); err != nil {
			var fe *pb.FieldError
			if !errors.As(err, &fe) || fe.Field == "" || !errors.Is(err, pb.ErrInvalidArgument) {
				t.Fatalf("Validate refused without a named field: %v", err)
			}
			return
		}
		if err := Validate(cmd, fsmLimits); err != nil {
			t.Fatalf("valid at the edge, invalid in the FSM: %v", err)
		}
		fsm := memFSM(t)
		res, ok := fsm.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: data}).(*pb.CommandResult)
		if !ok || res.GetErrorCode() != pb.Code_CODE_OK {
			t.Fatalf("valid command rejected by a fresh FSM: %v", res)
		}
		checkKeyspace(t, fsm)
	})
}

// FuzzApply: any decodable entry, applied after a short seeded workload,
// never panics and leaves a consistent keyspace; applied again at the
// next index, too. Two replicas, one taking the input in the prefix's
// batch, agree.
func FuzzApply(f *testing.F) {
	p := getPrefix(f)
	for _, b := range seedCommands(f, p) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := DecodeCommand(data); err != nil {
			return
		}
		next := uint64(len(p.logs)) + 1
		in := &raft.Log{Index: next, Term: 2, Type: raft.LogCommand, Data: data}
		again := &raft.Log{Index: next + 1, Term: 2, Type: raft.LogCommand, Data: data}

		a := memFSM(t)
		a.ApplyBatch(p.logs)
		for _, l := range []*raft.Log{in, again} {
			if _, ok := a.Apply(l).(*pb.CommandResult); !ok {
				t.Fatalf("index %d: no CommandResult", l.Index)
			}
		}
		checkKeyspace(t, a)

		b := memFSM(t)
		b.ApplyBatch(append(append([]*raft.Log{}, p.logs...), in, again))
		if mustHash(t, a) != mustHash(t, b) {
			t.Fatal("batched replica diverged")
		}
	})
}
