package fsm

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// keyRules makes a queue keyed or not (per-key limit, order, debounce),
// or sets a key's overrides: the workload's share of fair queues.
func (w *workload) keyRules(now int64, q QueueRef) *pb.Command {
	if w.pct(30) {
		c := &pb.SetKeyLimitCmd{Queue: q.Queue, Tenant: q.Tenant, Key: []byte(fmt.Sprintf("cust-%d", w.rng.IntN(5)))}
		if w.pct(70) {
			c.MaxRunning = proto.Uint32(uint32(w.rng.IntN(3)))
		}
		if c.MaxRunning == nil || w.pct(50) {
			c.Weight = proto.Uint32(uint32(w.rng.IntN(4)))
		}
		return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_KEY_LIMIT, Now: now,
			Body: &pb.Command_SetKeyLimit{SetKeyLimit: c}}
	}
	c := &pb.SetQueueLimitsCmd{Queue: q.Queue, Tenant: q.Tenant}
	if w.pct(60) {
		c.MaxRunningPerKey = proto.Uint32(uint32(w.rng.IntN(3)))
	}
	if w.pct(50) {
		o := pb.QueueOrder(w.rng.IntN(2))
		c.Order = &o
	}
	if w.pct(25) {
		k := pb.PerKeyPending(w.rng.IntN(3))
		c.PerKeyPending, c.PerKeyPendingDepth = &k, proto.Uint32(uint32(w.rng.IntN(4)))
	}
	if c.MaxRunningPerKey == nil && c.Order == nil && c.PerKeyPending == nil {
		c.MaxRunningPerKey = proto.Uint32(0)
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS, Now: now,
		Body: &pb.Command_SetQueueLimits{SetQueueLimits: c}}
}

// dumpKeyed lists every keyed queue's keys and orders, for comparison.
func dumpKeyed(s *keyedSet) []string {
	var out []string
	for ref, kq := range s.queues {
		out = append(out, fmt.Sprintf("queue %s/%s fair=%v per-key=%d debounce=%v/%d keys=%d claimable=%d",
			ref.Queue, ref.Tenant, kq.fair, kq.perKey, kq.debounce, kq.depth, len(kq.keys), kq.claimable))
		kq.each(func(ks *keyState) {
			line := fmt.Sprintf("  %s/%s key %q running=%d turn=%d limit=%d weight=%d pending=%d saved=%v:",
				ref.Queue, ref.Tenant, ks.mk, ks.running, ks.turn, ks.limit, ks.weight, ks.npending, ks.saved)
			for p, tr := range ks.pending {
				if tr == nil {
					continue
				}
				tr.Ascend(func(it keyItem) bool {
					line += fmt.Sprintf(" %d/%d/%s", p, it.seq, it.id)
					return true
				})
			}
			out = append(out, line)
		})
		for p, tr := range kq.active {
			var order []string
			tr.Ascend(func(it activeItem) bool {
				order = append(order, fmt.Sprintf("%s(%d/%d@%d)", it.mk, it.running, it.weight, it.at))
				return true
			})
			if len(order) > 0 {
				out = append(out, fmt.Sprintf("  %s/%s order %d: %v", ref.Queue, ref.Tenant, p, order))
			}
		}
	}
	sort.Strings(out)
	return out
}

// checkKeyed compares apply's keyed state with one built afresh from
// Pebble: what a restart would hold must be what apply holds.
func checkKeyed(t testing.TB, f *FSM) {
	t.Helper()
	f.keyed.mu.Lock()
	defer f.keyed.mu.Unlock()
	if f.keyed.stale {
		t.Fatal("keyed queues stale after a committed batch")
	}
	r, release, err := f.reader()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	fresh := newKeyedSet()
	if err := fresh.rebuild(r); err != nil {
		t.Fatal(err)
	}
	got, want := dumpKeyed(f.keyed), dumpKeyed(fresh)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("keyed queues differ from a rebuild:\napply:\n%v\nrebuild:\n%v", lines(got), lines(want))
	}
}

func lines(s []string) string {
	out := ""
	for _, l := range s {
		out += l + "\n"
	}
	return out
}

func setPerKeyCmd(now int64, q, tn string, perKey uint32, order pb.QueueOrder) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS, Now: now,
		Body: &pb.Command_SetQueueLimits{SetQueueLimits: &pb.SetQueueLimitsCmd{Queue: q, Tenant: tn,
			MaxRunningPerKey: proto.Uint32(perKey), Order: &order}}}
}

func keyedTask(q, tn, key string) *pb.NewTask {
	t := nt(q, tn, 0)
	t.Key = []byte(key)
	return t
}

// Test_ClaimViewCountsKeysBelowTheirLimit: when every key with pending
// tasks is at its limit, the leader's claim admission sees nothing to
// claim, so a long poll waits instead of proposing empty claims; a
// running task's end frees its key again.
func Test_ClaimViewCountsKeysBelowTheirLimit(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(LevelFairQueues))
	ref := QueueRef{"q", "acme"}
	h.do(setPerKeyCmd(t0, "q", "acme", 1, pb.QueueOrder_QUEUE_ORDER_FAIR))
	h.enqueue(t0, keyedTask("q", "acme", "a"), keyedTask("q", "acme", "a"), keyedTask("q", "acme", "b"))
	if n, _, _ := h.f.ClaimView(ref, t0); n != 3 {
		t.Fatalf("claim view before any claim: %d claimable, want 3", n)
	}
	got := h.claim(at(time.Second), "q", "acme", 5)
	if len(got) != 2 {
		t.Fatalf("claimed %d tasks, want one per key (2)", len(got))
	}
	if n, due, _ := h.f.ClaimView(ref, at(time.Second)); n != 0 || due {
		t.Fatalf("claim view with every key at its limit: %d claimable (due %v), want 0", n, due)
	}
	h.do(completeCmd(at(2*time.Second), got[0].GetId(), got[0].GetFence()))
	if n, _, _ := h.f.ClaimView(ref, at(2*time.Second)); n != 1 {
		t.Fatalf("claim view after key a's task ended: %d claimable, want 1", n)
	}
	h.reopen()
	if n, _, _ := h.f.ClaimView(ref, at(2*time.Second)); n != 1 {
		t.Fatalf("claim view after a reopen: %d claimable, want 1", n)
	}
	checkKeyspace(t, h.f)
}
