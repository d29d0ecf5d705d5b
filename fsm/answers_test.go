package fsm

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func bigTask(q string, size int) *pb.NewTask {
	return &pb.NewTask{Queue: q, Tenant: "acme", Payload: bytes.Repeat([]byte{'x'}, size)}
}

func answerSize(tasks []*pb.Task) int {
	return proto.Size(&pb.ClaimResponse{Tasks: tasks})
}

// A claim stops before the task that would pass AnswerBudget, takes at
// least one however large, and leaves the rest pending; each claim of a
// Batch has its own budget.
func Test_ClaimStopsAtAnswerBudget(t *testing.T) {
	h := newHarness(t)
	const mib = 1 << 20
	for i := 0; i < 12; i++ {
		h.enqueue(at(0), bigTask("big", mib))
	}
	got := h.claim(at(1), "big", "acme", 1000)
	if n := len(got); n == 0 || n >= 4 || answerSize(got) > AnswerBudget {
		t.Fatalf("claim took %d tasks, %d bytes; want 1..3 within %d", n, answerSize(got), AnswerBudget)
	}
	st := h.stats("big", "acme")
	if st.GetRunning() != uint64(len(got)) || st.GetPending() != uint64(12-len(got)) {
		t.Fatalf("stats %v after a claim of %d", st, len(got))
	}

	// Two claims sharing one Batch entry: each gets its own budget.
	res := h.do(batchCmd(at(2),
		claimCmd(at(2), "big", "acme", "w1", lease, 1000),
		claimCmd(at(2), "big", "acme", "w2", lease, 1000)))
	for i, r := range res.GetResults() {
		if n := len(r.GetTasks()); n != len(got) {
			t.Fatalf("batched claim %d took %d tasks, alone %d", i, n, len(got))
		}
	}

	// One task larger than the budget is still claimed, alone.
	h.enqueue(at(3), bigTask("huge", 5*mib), bigTask("huge", 1))
	one := h.claim(at(4), "huge", "acme", 1000)
	if len(one) != 1 || len(one[0].GetPayload()) != 5*mib {
		t.Fatalf("claim of a 5 MiB head took %d tasks", len(one))
	}
	if rest := h.claim(at(5), "huge", "acme", 1000); len(rest) != 1 {
		t.Fatalf("the task behind the large one: %d claimed", len(rest))
	}

	// Small tasks: the count, not the budget, stops the claim.
	for i := 0; i < 5; i++ {
		h.enqueue(at(6), bigTask("small", 100))
	}
	if n := len(h.claim(at(7), "small", "acme", 1000)); n != 5 {
		t.Fatalf("claimed %d small tasks, want 5", n)
	}
}

// The head hints stay right when a claim stops at the budget: what it left
// is claimed next, in order, and nothing is skipped.
func Test_ClaimBudgetKeepsFIFO(t *testing.T) {
	h := newHarness(t)
	var ids []string
	for i := 0; i < 9; i++ {
		ids = append(ids, h.enqueue(at(0), bigTask("big", 1<<20))...)
	}
	var order []string
	for len(order) < len(ids) {
		got := h.claim(at(1), "big", "acme", 1000)
		if len(got) == 0 {
			t.Fatalf("claim found nothing after %d of %d", len(order), len(ids))
		}
		for _, task := range got {
			order = append(order, task.GetId())
		}
	}
	if strings.Join(order, ",") != strings.Join(ids, ",") {
		t.Fatalf("claimed in order %v, enqueued %v", order, ids)
	}
	checkKeyspace(t, h.f)
}

// MaxTaskBytes bounds the largest task record the FSM can store.
func Test_MaxTaskBytesBoundsALargestTask(t *testing.T) {
	big := bytes.Repeat([]byte{0xff}, PayloadCeiling)
	name := strings.Repeat("q", MaxNameLen)
	task := &pb.Task{
		Id: strings.Repeat("i", MaxIDLen), Queue: name, Tenant: name, Payload: big,
		Priority: MaxPriority, State: pb.TaskState_TASK_STATE_DEAD, Attempts: MaxAttemptsLimit,
		MaxAttempts: MaxAttemptsLimit, IdempotencyKey: strings.Repeat("k", MaxIdemKeyLen),
		RetentionNs: -1, CreatedAt: -1, VisibleAt: -1, Seq: ^uint64(0), Fence: ^uint64(0),
		WorkerId: strings.Repeat("w", MaxWorkerIDLen), LeaseNs: -1, LeaseUntil: -1, ClaimedAt: -1,
		Progress: big, Outcome: pb.Outcome_OUTCOME_FAILED, Result: big,
		LastError: strings.Repeat("e", MaxErrorLen), FinishedAt: -1, ExpireAt: -1, Claims: ^uint32(0),
	}
	for range MaxHistory {
		task.History = append(task.History, &pb.Attempt{Claim: ^uint32(0), WorkerId: strings.Repeat("w", MaxWorkerIDLen),
			Fence: ^uint64(0), ClaimedAt: -1, LeaseUntil: -1, EndedAt: -1, Outcome: pb.AttemptOutcome_ATTEMPT_OUTCOME_RELEASED,
			Error: strings.Repeat("e", MaxAttemptError)})
		if n := proto.Size(task.History[len(task.History)-1]) + 3; n > MaxAttemptBytes {
			t.Fatalf("largest attempt is %d bytes with its tag and length > MaxAttemptBytes %d", n, MaxAttemptBytes)
		}
	}
	if n := proto.Size(task); n > MaxTaskBytes {
		t.Fatalf("largest task is %d bytes > MaxTaskBytes %d", n, MaxTaskBytes)
	}
}

func releaseCmd(now int64, items ...*pb.ReapItem) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_RELEASE, Now: now,
		Body: &pb.Command_Release{Release: &pb.ReleaseCmd{Items: items}}}
}

// A released task goes back to the head of its queue with no attempt
// counted; a release with a stale fence, or of a task reaped and claimed
// again since, changes nothing.
func Test_ReleaseRequeuesWithoutAttempt(t *testing.T) {
	h := newHarness(t)
	ids := h.enqueue(at(0), nt("q", "acme", 0), nt("q", "acme", 0))
	first := h.claimOne(at(1), "q", "acme")
	if first.GetId() != ids[0] {
		t.Fatalf("claimed %s first, want %s", first.GetId(), ids[0])
	}
	h.one(releaseCmd(at(2), &pb.ReapItem{TaskId: first.GetId(), Fence: first.GetFence() + 1}), pb.Code_CODE_STALE_FENCE)
	h.one(releaseCmd(at(2), &pb.ReapItem{TaskId: first.GetId(), Fence: first.GetFence()}), pb.Code_CODE_OK)
	got := h.task(first.GetId())
	if got.GetState() != pb.TaskState_TASK_STATE_PENDING || got.GetAttempts() != 0 || got.GetWorkerId() != "" {
		t.Fatalf("released task: %v", got)
	}
	// It is the head again, before the task enqueued after it.
	again := h.claimOne(at(3), "q", "acme")
	if again.GetId() != ids[0] || again.GetFence() <= first.GetFence() {
		t.Fatalf("claim after release took %s fence %d; want %s with a fence above %d", again.GetId(), again.GetFence(), ids[0], first.GetFence())
	}
	// The old fence cannot release the new claim, nor submit.
	h.one(releaseCmd(at(4), &pb.ReapItem{TaskId: first.GetId(), Fence: first.GetFence()}), pb.Code_CODE_STALE_FENCE)
	h.one(completeCmd(at(4), first.GetId(), first.GetFence()), pb.Code_CODE_STALE_FENCE)
	h.one(releaseCmd(at(4), &pb.ReapItem{TaskId: "nope", Fence: 1}), pb.Code_CODE_NOT_FOUND)
	checkKeyspace(t, h.f)
}
