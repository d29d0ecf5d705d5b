package fsm

import (
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func batchCmd(now int64, cmds ...*pb.Command) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_BATCH, Now: now,
		Body: &pb.Command_Batch{Batch: &pb.BatchCmd{Commands: cmds}}}
}

// Test_BatchRunsEachCommandAlone covers what callers whose commands were
// coalesced rely on: each command answers as if it were its own entry, a
// rejected one leaves the others alone, ids never collide and FIFO follows
// the order of the commands.
func Test_BatchRunsEachCommandAlone(t *testing.T) {
	h := newHarness(t)
	now := at(time.Second)
	res := h.do(batchCmd(now,
		enqueueCmd(0, nt("q", "t", 1)),
		enqueueCmd(0, nt("q", "t", 1), nt("q", "t", 1)),
		submitCmd(0, "", 0, pb.Outcome_OUTCOME_COMPLETED, ""), // invalid: no task id
		claimCmd(0, "q", "t", "w1", lease, 2),
		claimCmd(0, "q", "t", "w2", lease, 2),
	))
	subs := res.GetResults()
	if len(subs) != 5 {
		t.Fatalf("%d results, want 5", len(subs))
	}
	var ids []string
	for _, s := range subs[:2] {
		for _, it := range s.GetItems() {
			if it.GetCode() != pb.Code_CODE_OK {
				t.Fatalf("enqueue item: %v %s", it.GetCode(), it.GetDetail())
			}
			ids = append(ids, it.GetTaskId())
		}
	}
	if len(ids) != 3 || ids[0] == ids[1] || ids[0] == ids[2] || ids[1] == ids[2] {
		t.Fatalf("ids %v: want three distinct", ids)
	}
	if c := subs[2].GetErrorCode(); c != pb.Code_CODE_INVALID_ARGUMENT || subs[2].GetErrorField() != "task_id" {
		t.Fatalf("bad submit: %v %q, want INVALID_ARGUMENT on task_id", c, subs[2].GetErrorField())
	}
	w1, w2 := subs[3].GetTasks(), subs[4].GetTasks()
	if len(w1) != 2 || len(w2) != 1 {
		t.Fatalf("claims got %d and %d tasks, want 2 and 1", len(w1), len(w2))
	}
	got := []string{w1[0].GetId(), w1[1].GetId(), w2[0].GetId()}
	for i := range ids {
		if got[i] != ids[i] {
			t.Fatalf("claim order %v, want enqueue order %v", got, ids)
		}
	}
	for _, tk := range append(w1, w2...) {
		if tk.GetFence() != h.index {
			t.Fatalf("fence %d, want the batch entry's index %d", tk.GetFence(), h.index)
		}
	}
	for _, s := range subs {
		if s.GetIndex() != h.index || s.GetNow() != now {
			t.Fatalf("result index %d now %d, want %d and %d", s.GetIndex(), s.GetNow(), h.index, now)
		}
	}
	// Each worker's fence is good for its own tasks, in a later batch too.
	res = h.do(batchCmd(at(2*time.Second),
		completeCmd(0, w1[0].GetId(), w1[0].GetFence()),
		completeCmd(0, w1[0].GetId(), w1[0].GetFence()),
		completeCmd(0, w2[0].GetId(), w2[0].GetFence()+1),
	))
	codes := []pb.Code{}
	for _, s := range res.GetResults() {
		codes = append(codes, s.GetItems()[0].GetCode())
	}
	want := []pb.Code{pb.Code_CODE_OK, pb.Code_CODE_ALREADY_DONE, pb.Code_CODE_STALE_FENCE}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("submit codes %v, want %v", codes, want)
		}
	}
}

// Test_BatchIdempotencyWithinOneEntry: two callers with the same key in
// one batch get one task, as they would in two entries.
func Test_BatchIdempotencyWithinOneEntry(t *testing.T) {
	h := newHarness(t)
	a, b := nt("q", "t", 0), nt("q", "t", 0)
	a.IdempotencyKey, b.IdempotencyKey = "k", "k"
	subs := h.do(batchCmd(at(0), enqueueCmd(0, a), enqueueCmd(0, b))).GetResults()
	first, second := subs[0].GetItems()[0], subs[1].GetItems()[0]
	if first.GetCode() != pb.Code_CODE_OK || second.GetCode() != pb.Code_CODE_DUPLICATE || first.GetTaskId() != second.GetTaskId() {
		t.Fatalf("got %v %s and %v %s, want OK then DUPLICATE of the same id",
			first.GetCode(), first.GetTaskId(), second.GetCode(), second.GetTaskId())
	}
	if n := h.stats("q", "t").GetPending(); n != 1 {
		t.Fatalf("pending %d, want 1", n)
	}
}

// Test_BatchShape covers the whole-batch rejections: they change nothing.
func Test_BatchShape(t *testing.T) {
	claims := make([]*pb.Command, maxPositions/pb.MaxBatch+1)
	for i := range claims {
		claims[i] = claimCmd(0, "q", "t", "w", lease, 1)
	}
	cases := []struct {
		name  string
		cmds  []*pb.Command
		field string
	}{
		{"empty", nil, "commands"},
		{"nested", []*pb.Command{batchCmd(0, enqueueCmd(0, nt("q", "t", 0)))}, "commands[0].type"},
		{"leader command", []*pb.Command{reapCmd(0, &pb.ReapItem{TaskId: "x", Fence: 1})}, "commands[0].type"},
		{"missing body", []*pb.Command{enqueueCmd(0, nt("q", "t", 0)), {Type: pb.CommandType_COMMAND_TYPE_CANCEL}}, "commands[1].body"},
		{"too many task positions", claims, "commands"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			res := h.apply(batchCmd(at(0), c.cmds...))
			if res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT || res.GetErrorField() != c.field {
				t.Fatalf("got %v on %q (%s), want INVALID_ARGUMENT on %q",
					res.GetErrorCode(), res.GetErrorField(), res.GetErrorDetail(), c.field)
			}
			if len(res.GetResults()) != 0 {
				t.Fatalf("%d results for a rejected batch", len(res.GetResults()))
			}
			// Only the applied index and time may move.
			if h.stats("q", "t").GetPending() != 0 {
				t.Fatal("a rejected batch enqueued a task")
			}
		})
	}
}
