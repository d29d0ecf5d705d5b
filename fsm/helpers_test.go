package fsm

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// t0 is the leader time of the first command of every test: a fixed Unix
// nanosecond instant, so time is fully controlled.
const t0 = int64(1_800_000_000) * int64(time.Second)

// at is t0 + d.
func at(d time.Duration) int64 { return t0 + int64(d) }

const (
	lease   = 10 * time.Second
	payload = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" +
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" // 128 bytes
)

// harness is one FSM fed entries at consecutive log indexes.
type harness struct {
	t     testing.TB
	f     *FSM
	dir   string
	opts  Options
	index uint64
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir()}
	h.f = mustOpen(t, h.dir, h.opts)
	return h
}

// mustOpen opens an FSM and closes it when the test ends.
func mustOpen(t testing.TB, dir string, opts Options) *FSM {
	t.Helper()
	f, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open fsm %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = f.Close() }) // a second Close is a no-op
	return f
}

// reopen closes the FSM and opens the same directory again.
func (h *harness) reopen() {
	h.t.Helper()
	if err := h.f.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.f = mustOpen(h.t, h.dir, h.opts)
}

func mustEncode(t testing.TB, cmd *pb.Command) []byte {
	t.Helper()
	b, err := EncodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// entry is the raft.Log that carries cmd at index.
func entry(t testing.TB, index uint64, cmd *pb.Command) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: mustEncode(t, cmd)}
}

// apply appends cmd as the next entry and returns the FSM's answer.
func (h *harness) apply(cmd *pb.Command) *pb.CommandResult {
	h.t.Helper()
	h.index++
	res, ok := h.f.Apply(entry(h.t, h.index, cmd)).(*pb.CommandResult)
	if !ok || res == nil {
		h.t.Fatalf("index %d: Apply returned no CommandResult", h.index)
	}
	return res
}

// do applies cmd and fails unless the command as a whole was accepted.
func (h *harness) do(cmd *pb.Command) *pb.CommandResult {
	h.t.Helper()
	res := h.apply(cmd)
	if res.GetErrorCode() != pb.Code_CODE_OK {
		h.t.Fatalf("index %d %v: rejected: %v %s %s", h.index, cmd.GetType(), res.GetErrorCode(), res.GetErrorField(), res.GetErrorDetail())
	}
	return res
}

// one applies a one-item command and checks the item's code.
func (h *harness) one(cmd *pb.Command, want pb.Code) *pb.ItemResult {
	h.t.Helper()
	res := h.do(cmd)
	if len(res.GetItems()) != 1 {
		h.t.Fatalf("index %d %v: %d items, want 1", h.index, cmd.GetType(), len(res.GetItems()))
	}
	it := res.GetItems()[0]
	if it.GetCode() != want {
		h.t.Fatalf("index %d %v: code %v (%s), want %v", h.index, cmd.GetType(), it.GetCode(), it.GetDetail(), want)
	}
	return it
}

// enqueue stores tasks in one entry and returns their ids; every item must
// be OK.
func (h *harness) enqueue(now int64, tasks ...*pb.NewTask) []string {
	h.t.Helper()
	res := h.do(enqueueCmd(now, tasks...))
	ids := make([]string, len(res.GetItems()))
	for i, it := range res.GetItems() {
		if it.GetCode() != pb.Code_CODE_OK {
			h.t.Fatalf("enqueue item %d: %v", i, it.GetCode())
		}
		ids[i] = it.GetTaskId()
	}
	return ids
}

// claim claims up to n tasks of q/tn with the standard lease.
func (h *harness) claim(now int64, q, tn string, n uint32) []*pb.Task {
	h.t.Helper()
	return h.do(claimCmd(now, q, tn, "w1", lease, n)).GetTasks()
}

// claimOne claims exactly one task and returns it.
func (h *harness) claimOne(now int64, q, tn string) *pb.Task {
	h.t.Helper()
	tasks := h.claim(now, q, tn, 1)
	if len(tasks) != 1 {
		h.t.Fatalf("claim at %d: %d tasks, want 1", now, len(tasks))
	}
	return tasks[0]
}

// task reads a task, failing if it is missing.
func (h *harness) task(id string) *pb.Task {
	h.t.Helper()
	t, err := h.f.GetTask(id)
	if err != nil {
		h.t.Fatalf("get %s: %v", id, err)
	}
	return t
}

// stats is the one QueueStats of q/tn (zero when the queue is unknown).
func (h *harness) stats(q, tn string) *pb.QueueStats {
	h.t.Helper()
	all, err := h.f.Stats(q, tn)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(all) == 0 {
		return &pb.QueueStats{Queue: q, Tenant: tn}
	}
	return all[0]
}

// mustHash is the keyspace hash.
func mustHash(t testing.TB, f *FSM) string {
	t.Helper()
	h, err := f.Hash()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func nt(q, tn string, prio uint32) *pb.NewTask {
	return &pb.NewTask{Queue: q, Tenant: tn, Priority: prio, Payload: []byte(payload)}
}

func enqueueCmd(now int64, tasks ...*pb.NewTask) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE, Now: now,
		Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: tasks}}}
}

func claimCmd(now int64, q, tn, worker string, lease time.Duration, n uint32) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CLAIM, Now: now,
		Body: &pb.Command_Claim{Claim: &pb.ClaimCmd{Queue: q, Tenant: tn, WorkerId: worker, LeaseNs: int64(lease), MaxTasks: n}}}
}

func heartbeatCmd(now int64, items ...*pb.HeartbeatItem) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_HEARTBEAT, Now: now,
		Body: &pb.Command_Heartbeat{Heartbeat: &pb.HeartbeatCmd{Items: items}}}
}

func submitCmd(now int64, id string, fence uint64, outcome pb.Outcome, result string) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SUBMIT, Now: now,
		Body: &pb.Command_Submit{Submit: &pb.SubmitCmd{TaskId: id, Fence: fence, Outcome: outcome, Result: []byte(result)}}}
}

func completeCmd(now int64, id string, fence uint64) *pb.Command {
	return submitCmd(now, id, fence, pb.Outcome_OUTCOME_COMPLETED, "ok")
}

func nackCmd(now int64, id string, fence uint64, delay time.Duration, reason string) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_NACK, Now: now,
		Body: &pb.Command_Nack{Nack: &pb.NackCmd{TaskId: id, Fence: fence, DelayNs: int64(delay), Reason: reason}}}
}

func cancelCmd(now int64, id string) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CANCEL, Now: now,
		Body: &pb.Command_Cancel{Cancel: &pb.CancelCmd{TaskId: id}}}
}

func reapCmd(now int64, items ...*pb.ReapItem) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_REAP, Now: now,
		Body: &pb.Command_Reap{Reap: &pb.ReapCmd{Items: items}}}
}

func timeOutCmd(now int64, items ...*pb.ReapItem) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_TIME_OUT, Now: now,
		Body: &pb.Command_TimeOut{TimeOut: &pb.TimeOutCmd{Items: items}}}
}

func promoteCmd(now int64, limit uint32) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_PROMOTE_DELAYED, Now: now,
		Body: &pb.Command_PromoteDelayed{PromoteDelayed: &pb.PromoteDelayedCmd{Limit: limit}}}
}

func purgeCmd(now int64, limit uint32) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_PURGE, Now: now,
		Body: &pb.Command_Purge{Purge: &pb.PurgeCmd{Limit: limit}}}
}

func requeueDeadCmd(now int64, id, q, tn string, limit uint32) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_REQUEUE_DEAD, Now: now,
		Body: &pb.Command_RequeueDead{RequeueDead: &pb.RequeueDeadCmd{TaskId: id, Queue: q, Tenant: tn, Limit: limit}}}
}

func setPausedCmd(now int64, q, tn string, paused bool) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_PAUSED, Now: now,
		Body: &pb.Command_SetQueuePaused{SetQueuePaused: &pb.SetQueuePausedCmd{Queue: q, Tenant: tn, Paused: paused}}}
}

func purgeQueueCmd(now int64, q, tn string, dead bool, limit uint32) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_PURGE_QUEUE, Now: now,
		Body: &pb.Command_PurgeQueue{PurgeQueue: &pb.PurgeQueueCmd{Queue: q, Tenant: tn, Dead: dead, Limit: limit}}}
}

// bufSink is a raft.SnapshotSink over memory.
type bufSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *bufSink) ID() string    { return "test" }
func (s *bufSink) Cancel() error { s.cancelled = true; return nil }
func (s *bufSink) Close() error  { s.closed = true; return nil }

var _ raft.SnapshotSink = (*bufSink)(nil)

// mustSnapshot persists f's snapshot into memory.
func mustSnapshot(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink := &bufSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed %v, cancelled %v", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

func restoreFrom(f *FSM, b []byte) error {
	return f.Restore(io.NopCloser(bytes.NewReader(b)))
}
