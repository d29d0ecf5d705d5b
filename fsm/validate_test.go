package fsm

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// populated is a harness with tasks in every state, so that a rejected
// command that changed anything would show in the keyspace.
func populated(t *testing.T) (*harness, *pb.Task) {
	h := newHarness(t)
	keyed := nt("q", "t", 3)
	keyed.IdempotencyKey = "k"
	delayed := nt("q", "t", 0)
	delayed.DelayNs = int64(time.Hour)
	dying := nt("q", "t", 9)
	dying.MaxAttempts = 1
	h.enqueue(at(0), dying, nt("q", "t", 8), nt("q", "t", 7), keyed, delayed)
	d := h.claimOne(at(0), "q", "t")
	h.one(nackCmd(at(0), d.GetId(), d.GetFence(), 0, "x"), pb.Code_CODE_OK)
	done := h.claimOne(at(0), "q", "t")
	h.one(completeCmd(at(0), done.GetId(), done.GetFence()), pb.Code_CODE_OK)
	running := h.claimOne(at(time.Second), "q", "t")
	return h, running
}

func Test_ValidationRejectsAndChangesNothing(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	enq := func(mut func(*pb.NewTask)) *pb.Command {
		a, b := nt("q", "t", 1), nt("q", "t", 1)
		mut(b) // the second task is bad: the first must not be stored either
		return enqueueCmd(at(time.Minute), a, b)
	}
	claim := func(mut func(*pb.ClaimCmd)) *pb.Command {
		c := claimCmd(at(time.Minute), "q", "t", "w", lease, 1)
		mut(c.GetClaim())
		return c
	}
	hb := func(mut func(*pb.HeartbeatItem)) *pb.Command {
		it := &pb.HeartbeatItem{TaskId: "id", Fence: 1}
		mut(it)
		return heartbeatCmd(at(time.Minute), it)
	}
	sub := func(mut func(*pb.SubmitCmd)) *pb.Command {
		c := completeCmd(at(time.Minute), "id", 1)
		mut(c.GetSubmit())
		return c
	}
	nack := func(mut func(*pb.NackCmd)) *pb.Command {
		c := nackCmd(at(time.Minute), "id", 1, 0, "")
		mut(c.GetNack())
		return c
	}
	rq := func(mut func(*pb.RequeueDeadCmd)) *pb.Command {
		c := requeueDeadCmd(at(time.Minute), "", "q", "t", 10)
		mut(c.GetRequeueDead())
		return c
	}
	huge := make([]byte, PayloadCeiling+1)
	cases := []struct {
		name     string
		cmd      *pb.Command
		field    string
		tooLarge bool
		onlyEdge bool // Validate rejects it; the log cannot carry it (unknown type)
	}{
		{"negative now", &pb.Command{Type: pb.CommandType_COMMAND_TYPE_PURGE, Now: -1,
			Body: &pb.Command_Purge{Purge: &pb.PurgeCmd{Limit: 1}}}, "now", false, false},
		{"unspecified type", &pb.Command{}, "type", false, true},
		{"unknown type", &pb.Command{Type: 99}, "type", false, true},
		{"body of another type", &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CLAIM, Now: at(time.Minute),
			Body: &pb.Command_Purge{Purge: &pb.PurgeCmd{Limit: 1}}}, "body", false, false},
		{"no body", &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SUBMIT, Now: at(time.Minute)}, "body", false, false},

		{"no tasks", enqueueCmd(at(time.Minute)), "tasks", false, false},
		{"too many tasks", enqueueCmd(at(time.Minute), make([]*pb.NewTask, pb.MaxBatch+1)...), "tasks", false, false},
		{"empty queue", enq(func(n *pb.NewTask) { n.Queue = "" }), "tasks[1].queue", false, false},
		{"slash in queue", enq(func(n *pb.NewTask) { n.Queue = "a/b" }), "tasks[1].queue", false, false},
		{"long queue", enq(func(n *pb.NewTask) { n.Queue = long(MaxNameLen + 1) }), "tasks[1].queue", false, false},
		{"empty tenant", enq(func(n *pb.NewTask) { n.Tenant = "" }), "tasks[1].tenant", false, false},
		{"space in tenant", enq(func(n *pb.NewTask) { n.Tenant = "a b" }), "tasks[1].tenant", false, false},
		{"payload over ceiling", enq(func(n *pb.NewTask) { n.Payload = huge }), "tasks[1].payload", true, false},
		{"priority 10", enq(func(n *pb.NewTask) { n.Priority = MaxPriority + 1 }), "tasks[1].priority", false, false},
		{"negative run_at", enq(func(n *pb.NewTask) { n.RunAt = -1 }), "tasks[1].run_at", false, false},
		{"run_at past the longest delay", enq(func(n *pb.NewTask) { n.RunAt = at(time.Minute) + int64(MaxDelay) + 1 }), "tasks[1].run_at", false, false},
		{"run_at 230 years ahead", enq(func(n *pb.NewTask) { n.RunAt = at(time.Minute) + 230*int64(365*24*time.Hour) }), "tasks[1].run_at", false, false},
		{"now past MaxTime", &pb.Command{Type: pb.CommandType_COMMAND_TYPE_PURGE, Now: MaxTime + 1,
			Body: &pb.Command_Purge{Purge: &pb.PurgeCmd{Limit: 1}}}, "now", false, false},
		{"now near 2262 with a delay", &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE, Now: math.MaxInt64 - int64(time.Hour),
			Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "t", DelayNs: int64(MaxDelay)}}}}}, "now", false, false},
		{"negative delay", enq(func(n *pb.NewTask) { n.DelayNs = -1 }), "tasks[1].delay_ns", false, false},
		{"delay too long", enq(func(n *pb.NewTask) { n.DelayNs = int64(MaxDelay) + 1 }), "tasks[1].delay_ns", false, false},
		{"max_attempts too big", enq(func(n *pb.NewTask) { n.MaxAttempts = MaxAttemptsLimit + 1 }), "tasks[1].max_attempts", false, false},
		{"long idempotency key", enq(func(n *pb.NewTask) { n.IdempotencyKey = long(MaxIdemKeyLen + 1) }), "tasks[1].idempotency_key", false, false},
		{"negative retention", enq(func(n *pb.NewTask) { n.RetentionNs = -1 }), "tasks[1].retention_ns", false, false},
		{"retention too long", enq(func(n *pb.NewTask) { n.RetentionNs = int64(MaxRetention) + 1 }), "tasks[1].retention_ns", false, false},

		{"claim empty queue", claim(func(c *pb.ClaimCmd) { c.Queue = "" }), "queue", false, false},
		{"claim bad tenant", claim(func(c *pb.ClaimCmd) { c.Tenant = "é" }), "tenant", false, false},
		{"claim no worker", claim(func(c *pb.ClaimCmd) { c.WorkerId = "" }), "worker_id", false, false},
		{"claim long worker", claim(func(c *pb.ClaimCmd) { c.WorkerId = long(MaxWorkerIDLen + 1) }), "worker_id", false, false},
		{"claim zero lease", claim(func(c *pb.ClaimCmd) { c.LeaseNs = 0 }), "lease_ns", false, false},
		{"claim short lease", claim(func(c *pb.ClaimCmd) { c.LeaseNs = int64(MinLease) - 1 }), "lease_ns", false, false},
		{"claim long lease", claim(func(c *pb.ClaimCmd) { c.LeaseNs = int64(MaxLease) + 1 }), "lease_ns", false, false},
		{"claim zero tasks", claim(func(c *pb.ClaimCmd) { c.MaxTasks = 0 }), "max_tasks", false, false},
		{"claim too many tasks", claim(func(c *pb.ClaimCmd) { c.MaxTasks = pb.MaxBatch + 1 }), "max_tasks", false, false},

		{"heartbeat no items", heartbeatCmd(at(time.Minute)), "items", false, false},
		{"heartbeat no id", hb(func(i *pb.HeartbeatItem) { i.TaskId = "" }), "items[0].task_id", false, false},
		{"heartbeat long id", hb(func(i *pb.HeartbeatItem) { i.TaskId = long(MaxIDLen + 1) }), "items[0].task_id", false, false},
		{"heartbeat no fence", hb(func(i *pb.HeartbeatItem) { i.Fence = 0 }), "items[0].fence", false, false},
		{"heartbeat huge progress", hb(func(i *pb.HeartbeatItem) { i.Progress = huge }), "items[0].progress", true, false},
		{"heartbeat short lease", hb(func(i *pb.HeartbeatItem) { i.LeaseNs = int64(time.Millisecond) }), "items[0].lease_ns", false, false},

		{"submit no id", sub(func(s *pb.SubmitCmd) { s.TaskId = "" }), "task_id", false, false},
		{"submit no fence", sub(func(s *pb.SubmitCmd) { s.Fence = 0 }), "fence", false, false},
		{"submit no outcome", sub(func(s *pb.SubmitCmd) { s.Outcome = 0 }), "outcome", false, false},
		{"submit unknown outcome", sub(func(s *pb.SubmitCmd) { s.Outcome = 7 }), "outcome", false, false},
		{"submit huge result", sub(func(s *pb.SubmitCmd) { s.Result = huge }), "result", true, false},
		{"submit long error", sub(func(s *pb.SubmitCmd) { s.Error = long(MaxErrorLen + 1) }), "error", false, false},

		{"nack no id", nack(func(n *pb.NackCmd) { n.TaskId = "" }), "task_id", false, false},
		{"nack no fence", nack(func(n *pb.NackCmd) { n.Fence = 0 }), "fence", false, false},
		{"nack negative delay", nack(func(n *pb.NackCmd) { n.DelayNs = -1 }), "delay_ns", false, false},
		{"nack long delay", nack(func(n *pb.NackCmd) { n.DelayNs = int64(MaxDelay) + 1 }), "delay_ns", false, false},
		{"nack long reason", nack(func(n *pb.NackCmd) { n.Reason = long(MaxErrorLen + 1) }), "reason", false, false},

		{"cancel no id", cancelCmd(at(time.Minute), ""), "task_id", false, false},
		{"cancel long id", cancelCmd(at(time.Minute), long(MaxIDLen+1)), "task_id", false, false},
		{"reap no items", reapCmd(at(time.Minute)), "items", false, false},
		{"reap no id", reapCmd(at(time.Minute), &pb.ReapItem{Fence: 1}), "items[0].task_id", false, false},
		{"reap no fence", reapCmd(at(time.Minute), &pb.ReapItem{TaskId: "x"}), "items[0].fence", false, false},
		{"pause no queue", setPausedCmd(at(time.Minute), "", "t", true), "queue", false, false},
		{"pause no tenant", setPausedCmd(at(time.Minute), "q", "", true), "tenant", false, false},
		{"resume slash in queue", setPausedCmd(at(time.Minute), "a/b", "t", false), "queue", false, false},
		{"purge queue no queue", purgeQueueCmd(at(time.Minute), "", "t", false, 1), "queue", false, false},
		{"purge queue bad tenant", purgeQueueCmd(at(time.Minute), "q", "a b", true, 1), "tenant", false, false},
		{"purge queue zero limit", purgeQueueCmd(at(time.Minute), "q", "t", false, 0), "limit", false, false},
		{"purge queue huge limit", purgeQueueCmd(at(time.Minute), "q", "t", true, pb.MaxBatch+1), "limit", false, false},
		{"promote zero limit", promoteCmd(at(time.Minute), 0), "limit", false, false},
		{"promote huge limit", promoteCmd(at(time.Minute), MaxScanLimit+1), "limit", false, false},
		{"purge zero limit", purgeCmd(at(time.Minute), 0), "limit", false, false},
		{"purge huge limit", purgeCmd(at(time.Minute), MaxScanLimit+1), "limit", false, false},

		{"requeue id and queue", rq(func(r *pb.RequeueDeadCmd) { r.TaskId = "x" }), "task_id", false, false},
		{"requeue long id", rq(func(r *pb.RequeueDeadCmd) { r.TaskId, r.Queue, r.Tenant = long(MaxIDLen+1), "", "" }), "task_id", false, false},
		{"requeue no queue", rq(func(r *pb.RequeueDeadCmd) { r.Queue = "" }), "queue", false, false},
		{"requeue bad tenant", rq(func(r *pb.RequeueDeadCmd) { r.Tenant = "a/b" }), "tenant", false, false},
		{"requeue zero limit", rq(func(r *pb.RequeueDeadCmd) { r.Limit = 0 }), "limit", false, false},
		{"requeue huge limit", rq(func(r *pb.RequeueDeadCmd) { r.Limit = pb.MaxBatch + 1 }), "limit", false, false},
	}
	h, running := populated(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.cmd, DefaultLimits())
			var fe *pb.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, pb.ErrInvalidArgument) {
				t.Fatalf("Validate = %v, want a FieldError on %q", err, c.field)
			}
			if pb.IsTooLarge(err) != c.tooLarge {
				t.Errorf("IsTooLarge = %v", !c.tooLarge)
			}
			if c.onlyEdge {
				return
			}
			before, now := stateHash(t, h.f), h.f.Now()
			res := h.apply(c.cmd)
			if res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT || res.GetErrorField() != c.field {
				t.Fatalf("apply: %v on %q, want INVALID_ARGUMENT on %q", res.GetErrorCode(), res.GetErrorField(), c.field)
			}
			if len(res.GetItems()) != 0 || len(res.GetTasks()) != 0 || res.GetIndex() != h.index {
				t.Fatalf("rejected command answered items %v tasks %v index %d", res.GetItems(), res.GetTasks(), res.GetIndex())
			}
			if got := pb.ResultError(res); !errors.Is(got, pb.ErrInvalidArgument) {
				t.Fatalf("ResultError = %v", got)
			}
			if stateHash(t, h.f) != before || h.f.Now() != now || h.f.AppliedIndex() != h.index {
				t.Fatal("rejected command changed the state")
			}
		})
	}
	// After all of that, the queue still works and the one running task is
	// untouched.
	h.one(completeCmd(at(2*time.Minute), running.GetId(), running.GetFence()), pb.Code_CODE_OK)
	checkKeyspace(t, h.f)
}

// Test_ValidateEdgeLimit: the edge's payload limit is tighter than the FSM's
// ceiling, and the ceiling clamps a larger configuration.
func Test_ValidateEdgeLimit(t *testing.T) {
	task := nt("q", "t", 0)
	task.Payload = make([]byte, DefaultMaxPayload+1)
	cmd := enqueueCmd(at(0), task)
	if err := Validate(cmd, DefaultLimits()); !pb.IsTooLarge(err) {
		t.Fatalf("edge: %v, want too large", err)
	}
	if err := Validate(cmd, Limits{MaxPayload: 2 * DefaultMaxPayload}); err != nil {
		t.Fatalf("raised edge limit: %v", err)
	}
	if err := Validate(cmd, fsmLimits); err != nil {
		t.Fatalf("fsm: %v", err)
	}
	task.Payload = make([]byte, PayloadCeiling+1)
	if err := Validate(cmd, Limits{MaxPayload: 1 << 30}); !pb.IsTooLarge(err) {
		t.Fatalf("limit above the ceiling was not clamped: %v", err)
	}
	if pb.IsTooLarge(errors.New("too large")) || pb.IsTooLarge(nil) {
		t.Fatal("IsTooLarge accepted a non-FieldError")
	}
}

// Test_ErrorMapping: every code maps to the sentinel a caller branches on.
func Test_ErrorMapping(t *testing.T) {
	cases := []struct {
		code pb.Code
		want error
	}{
		{pb.Code_CODE_NOT_FOUND, pb.ErrNotFound},
		{pb.Code_CODE_STALE_FENCE, pb.ErrStaleFence},
		{pb.Code_CODE_WRONG_STATE, pb.ErrWrongState},
		{pb.Code_CODE_INVALID_ARGUMENT, pb.ErrInvalidArgument},
	}
	for _, c := range cases {
		if err := pb.CodeError(c.code, "f", "detail"); !errors.Is(err, c.want) {
			t.Errorf("CodeError(%v) = %v", c.code, err)
		}
		if err := pb.ItemError(&pb.ItemResult{Code: c.code, TaskId: "x"}); !errors.Is(err, c.want) {
			t.Errorf("ItemError(%v) = %v", c.code, err)
		}
	}
	for _, ok := range []pb.Code{pb.Code_CODE_OK, pb.Code_CODE_DUPLICATE, pb.Code_CODE_ALREADY_DONE} {
		if err := pb.ItemError(&pb.ItemResult{Code: ok}); err != nil {
			t.Errorf("ItemError(%v) = %v, want nil", ok, err)
		}
	}
	if pb.ResultError(nil) == nil || pb.ResultError(&pb.CommandResult{}) != nil {
		t.Error("ResultError of nil / OK")
	}
	if pb.CodeError(99, "", "") == nil {
		t.Error("unknown code mapped to nil")
	}
}

// Test_TaskIDFormat: ids are 16 hex digits of the index and 4 of the
// position, so they sort by creation.
func Test_TaskIDFormat(t *testing.T) {
	cases := []struct {
		index uint64
		pos   int
	}{{0, 0}, {1, 0}, {0x2a, 3}, {1 << 40, 999}, {^uint64(0), 0xffff}, {7, 0x10000}}
	for _, c := range cases {
		want := fmt.Sprintf("%016x%04x", c.index, c.pos)
		if got := TaskID(c.index, c.pos); got != want {
			t.Errorf("TaskID(%d, %d) = %q, want %q", c.index, c.pos, got, want)
		}
	}
	if !(TaskID(9, 999) < TaskID(10, 0) && TaskID(10, 0) < TaskID(10, 1)) {
		t.Error("ids do not sort by creation")
	}
}

// Test_TimeBounds: every time the FSM computes (visible_at, lease_until,
// expire_at) stays in range at the latest now it accepts, run_at is judged
// against the time a command runs at (a Batch's for its commands, which
// carry no time of their own), and the FSM saturates rather than wraps a
// time it inherits from an older keyspace.
func Test_TimeBounds(t *testing.T) {
	if got := time.Unix(0, MaxTime).UTC(); got != time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC) {
		t.Fatalf("MaxTime is %v", got)
	}
	for _, d := range []time.Duration{MaxDelay, MaxLease, MaxRetention} {
		if MaxTime > math.MaxInt64-int64(d) {
			t.Fatalf("MaxTime + %v overflows", d)
		}
	}

	h := newHarness(t)
	last := MaxTime
	task := nt("q", "t", 0)
	task.RetentionNs = int64(MaxRetention)
	h.enqueue(last, task)
	far := nt("q", "t", 0)
	far.DelayNs = int64(MaxDelay)
	farID := h.enqueue(last, far)[0]
	if got := h.task(farID).GetVisibleAt(); got != MaxTime+int64(MaxDelay) {
		t.Fatalf("visible_at %d, want %d", got, MaxTime+int64(MaxDelay))
	}
	c := h.claimOne(last, "q", "t")
	if c.GetLeaseUntil() != MaxTime+int64(lease) {
		t.Fatalf("lease_until %d", c.GetLeaseUntil())
	}
	h.one(completeCmd(last, c.GetId(), c.GetFence()), pb.Code_CODE_OK)
	if got := h.task(c.GetId()).GetExpireAt(); got != MaxTime+int64(MaxRetention) {
		t.Fatalf("expire_at %d, want %d", got, MaxTime+int64(MaxRetention))
	}

	// run_at up to the longest delay ahead of the time the command runs.
	ok := nt("q", "t", 0)
	ok.RunAt = at(time.Minute) + int64(MaxDelay)
	if err := Validate(enqueueCmd(at(time.Minute), ok), DefaultLimits()); err != nil {
		t.Fatalf("run_at at the bound: %v", err)
	}
	// Unstamped (at the edge, before the leader stamps it): only the
	// absolute bound applies.
	unstamped := enqueueCmd(0, ok)
	if err := Validate(unstamped, DefaultLimits()); err != nil {
		t.Fatalf("unstamped run_at: %v", err)
	}
	beyond := nt("q", "t", 0)
	beyond.RunAt = MaxTime + int64(MaxDelay) + 1
	if err := Validate(enqueueCmd(0, beyond), DefaultLimits()); err == nil {
		t.Fatal("unstamped run_at past MaxTime+MaxDelay accepted")
	}

	// In a Batch, each command is judged at the batch's time.
	b := newHarness(t)
	edge, late := nt("q", "t", 0), nt("q", "t", 0)
	edge.RunAt = at(0) + int64(MaxDelay)
	late.RunAt = at(0) + int64(MaxDelay) + 1
	batch := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_BATCH, Now: at(0), Body: &pb.Command_Batch{Batch: &pb.BatchCmd{
		Commands: []*pb.Command{enqueueCmd(0, edge), enqueueCmd(0, late)}}}}
	res := b.apply(batch)
	if r := res.GetResults(); len(r) != 2 || r[0].GetErrorCode() != pb.Code_CODE_OK ||
		r[1].GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT || r[1].GetErrorField() != "tasks[0].run_at" {
		t.Fatalf("batch results %v", r)
	}

	if addTime(math.MaxInt64-5, 10) != math.MaxInt64 || addTime(5, 10) != 15 || addTime(-5, 3) != -2 {
		t.Fatal("addTime does not saturate")
	}
}
