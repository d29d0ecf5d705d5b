package fsm

import (
	"testing"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func limitedEnqueue(now int64, maxTasks, maxBytes uint64, tasks ...*pb.NewTask) *pb.Command {
	cmd := enqueueCmd(now, tasks...)
	StampTenantLimits(cmd, maxTasks, maxBytes)
	return cmd
}

func codes(res *pb.CommandResult) []pb.Code {
	var out []pb.Code
	for _, it := range res.GetItems() {
		out = append(out, it.GetCode())
	}
	return out
}

// A tenant at its stamped limit gets its new tasks refused, item by item,
// with nothing stored; other tenants are not affected; purging its
// finished tasks makes room again.
func Test_TenantLimitRefusesEnqueue(t *testing.T) {
	h := newHarness(t)
	keyed := nt("q", "acme", 0)
	keyed.IdempotencyKey = "k1"
	res := h.do(limitedEnqueue(at(0), 2, 0, nt("q", "acme", 0), nt("q", "acme", 0), keyed))
	want := []pb.Code{pb.Code_CODE_OK, pb.Code_CODE_OK, pb.Code_CODE_RESOURCE_EXHAUSTED}
	if got := codes(res); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("codes %v, want %v", got, want)
	}
	if d := res.GetItems()[2].GetDetail(); d == "" || res.GetItems()[2].GetTaskId() != "" {
		t.Fatalf("refused item: %v", res.GetItems()[2])
	}
	if st := h.stats("q", "acme"); st.GetPending() != 2 {
		t.Fatalf("stats after refusal: %v", st)
	}
	// Another tenant has its own count.
	h.enqueue(at(1), nt("q", "beta", 0), nt("q", "beta", 0))
	// Without limits stamped (an older leader, or none configured) nothing
	// is refused.
	h.enqueue(at(1), nt("q", "acme", 0))
	// Finish and purge acme's tasks: room again, and the refused key is free.
	for _, task := range h.claim(at(2), "q", "acme", 10) {
		h.one(completeCmd(at(2), task.GetId(), task.GetFence()), pb.Code_CODE_OK)
	}
	if got := codes(h.do(limitedEnqueue(at(3), 2, 0, keyed))); got[0] != pb.Code_CODE_RESOURCE_EXHAUSTED {
		t.Fatalf("finished but unpurged tasks still count: got %v", got)
	}
	h.do(purgeCmd(at(3)+int64(pb.DefaultRetention), 100))
	if got := codes(h.do(limitedEnqueue(at(3)+int64(pb.DefaultRetention), 2, 0, keyed))); got[0] != pb.Code_CODE_OK {
		t.Fatalf("after purge: %v", got)
	}
	checkKeyspace(t, h.f)
}

// The byte limit counts encoded task records.
func Test_TenantByteLimit(t *testing.T) {
	h := newHarness(t)
	res := h.do(limitedEnqueue(at(0), 0, 3000, bigTask("q", 1000), bigTask("q", 1000), bigTask("q", 1000), bigTask("q", 10)))
	want := []pb.Code{pb.Code_CODE_OK, pb.Code_CODE_OK, pb.Code_CODE_RESOURCE_EXHAUSTED, pb.Code_CODE_OK}
	got := codes(res)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("codes %v, want %v", got, want)
		}
	}
	checkKeyspace(t, h.f)
}

// Stamping replaces what a caller put in the command, inside Batches too,
// and zero limits stamp none.
func Test_StampTenantLimits(t *testing.T) {
	cmd := enqueueCmd(at(0), nt("q", "acme", 0))
	cmd.GetEnqueue().Limits = &pb.TenantLimits{MaxTasks: 1 << 40}
	StampTenantLimits(cmd, 5, 0)
	if l := cmd.GetEnqueue().GetLimits(); l.GetMaxTasks() != 5 || l.GetMaxBytes() != 0 {
		t.Fatalf("stamped %v", l)
	}
	StampTenantLimits(cmd, 0, 0)
	if cmd.GetEnqueue().GetLimits() != nil {
		t.Fatal("zero limits left a record")
	}
	b := batchCmd(at(0), enqueueCmd(at(0), nt("q", "acme", 0)), claimCmd(at(0), "q", "acme", "w", lease, 1))
	StampTenantLimits(b, 0, 7)
	if l := b.GetBatch().GetCommands()[0].GetEnqueue().GetLimits(); l.GetMaxBytes() != 7 {
		t.Fatalf("batched enqueue stamped %v", l)
	}
}
