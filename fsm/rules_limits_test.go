package fsm

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// limitsHarness is a harness whose cluster latched LevelLimits, as a
// leader does before it proposes SetQueueLimits.
func limitsHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.do(latchCmd(LevelLimits))
	return h
}

func u32(v uint32) *uint32 { return &v }
func u64(v uint64) *uint64 { return &v }

// limitsCmd sets the given limits of q/tn (tenant-wide when q is empty).
func limitsCmd(now int64, q, tn string, maxRunning *uint32, rateMilli *uint64, burst *uint32) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS, Now: now, Body: &pb.Command_SetQueueLimits{
		SetQueueLimits: &pb.SetQueueLimitsCmd{Queue: q, Tenant: tn, MaxRunning: maxRunning, RateMilli: rateMilli, Burst: burst}}}
}

// fill enqueues n tasks of q/tn.
func (h *harness) fill(now int64, q, tn string, n int) []string {
	h.t.Helper()
	tasks := make([]*pb.NewTask, n)
	for i := range tasks {
		tasks[i] = nt(q, tn, 0)
	}
	return h.enqueue(now, tasks...)
}

// Test_ConcurrencyLimit: a claim takes at most limit - running tasks,
// whatever its max_tasks, and a task that ends frees its place.
func Test_ConcurrencyLimit(t *testing.T) {
	for _, limit := range []uint32{0, 1, 3} {
		for _, maxTasks := range []uint32{1, 2, 5} {
			t.Run(fmt.Sprintf("limit=%d/max_tasks=%d", limit, maxTasks), func(t *testing.T) {
				h := limitsHarness(t)
				h.fill(at(0), "q", "a", 8)
				if limit > 0 {
					h.one(limitsCmd(at(0), "q", "a", u32(limit), nil, nil), pb.Code_CODE_OK)
				}
				var running []*pb.Task
				for i := 0; i < 20; i++ {
					got := h.claim(at(0), "q", "a", maxTasks)
					if len(got) == 0 {
						break
					}
					running = append(running, got...)
				}
				want := 8
				if limit > 0 {
					want = int(limit)
				}
				if len(running) != want {
					t.Fatalf("claims took %d tasks, want %d", len(running), want)
				}
				if s := h.stats("q", "a"); s.GetRunning() != uint64(want) || s.GetMaxRunning() != limit {
					t.Fatalf("stats %v", s)
				}
				if limit == 0 {
					return
				}
				h.one(completeCmd(at(time.Second), running[0].GetId(), running[0].GetFence()), pb.Code_CODE_OK)
				got := h.claim(at(time.Second), "q", "a", 5)
				if len(got) != 1 {
					t.Fatalf("after one submit a claim took %d, want 1", len(got))
				}
				h.one(nackCmd(at(time.Second), got[0].GetId(), got[0].GetFence(), 0, "x"), pb.Code_CODE_OK)
				if got := h.claim(at(time.Second), "q", "a", 5); len(got) != 1 {
					t.Fatalf("after a nack a claim took %d, want 1", len(got))
				}
			})
		}
	}
}

// Test_ConcurrencyLimitLowered: a limit set below the running count stops
// claims until enough running tasks end; none is taken from its worker.
func Test_ConcurrencyLimitLowered(t *testing.T) {
	h := limitsHarness(t)
	h.fill(at(0), "q", "a", 6)
	h.one(limitsCmd(at(0), "q", "a", u32(3), nil, nil), pb.Code_CODE_OK)
	run := h.claim(at(0), "q", "a", 5)
	if len(run) != 3 {
		t.Fatalf("took %d, want 3", len(run))
	}
	h.one(limitsCmd(at(0), "q", "a", u32(1), nil, nil), pb.Code_CODE_OK)
	for i, tk := range run {
		if got := h.claim(at(0), "q", "a", 5); len(got) != 0 {
			t.Fatalf("with %d running over a limit of 1 a claim took %d", 3-i, len(got))
		}
		h.one(completeCmd(at(0), tk.GetId(), tk.GetFence()), pb.Code_CODE_OK)
	}
	if got := h.claim(at(0), "q", "a", 5); len(got) != 1 {
		t.Fatalf("with none running a claim took %d, want 1", len(got))
	}
	// Cleared: the rest goes.
	h.one(limitsCmd(at(0), "q", "a", u32(0), nil, nil), pb.Code_CODE_OK)
	if got := h.claim(at(0), "q", "a", 5); len(got) != 2 {
		t.Fatalf("after clearing a claim took %d, want 2", len(got))
	}
}

// Test_RateLimitTokens walks a bucket of 2 tasks a second and burst 3
// through stamped times: full at first, empty after, one token every
// 500 ms, never more than the burst, and time stamped in the past takes
// nothing that was not due.
func Test_RateLimitTokens(t *testing.T) {
	h := limitsHarness(t)
	h.fill(at(0), "q", "a", 40)
	h.one(limitsCmd(at(0), "q", "a", nil, u64(2000), u32(3)), pb.Code_CODE_OK)
	steps := []struct {
		at   time.Duration
		want int
	}{
		{0, 3}, {0, 0}, {499 * time.Millisecond, 0}, {500 * time.Millisecond, 1},
		{300 * time.Millisecond, 0}, // stamped in the past: the FSM's time stays at 500 ms
		{1500 * time.Millisecond, 2}, {1999 * time.Millisecond, 0}, {2 * time.Second, 1},
		{time.Hour, 3}, {time.Hour, 0},
	}
	for i, s := range steps {
		if got := h.claim(at(s.at), "q", "a", 10); len(got) != s.want {
			t.Fatalf("step %d at %v: took %d, want %d", i, s.at, len(got), s.want)
		}
	}
	n, next, err := h.f.ClaimAllowance("q", "a", at(time.Hour))
	if err != nil || n != 0 || next != at(time.Hour+500*time.Millisecond) {
		t.Fatalf("ClaimAllowance = %d, next %d (%v), want 0 and a token at +500ms (%d)", n, next, err, at(time.Hour+500*time.Millisecond))
	}
	// Stats at the FSM's time: no whole token yet, then a part of one.
	if s := h.stats("q", "a"); s.GetRateMilli() != 2000 || s.GetBurst() != 3 || s.GetTokensMilli() != 0 {
		t.Fatalf("stats %v", s)
	}
	h.do(promoteCmd(at(time.Hour+250*time.Millisecond), 1))
	if s := h.stats("q", "a"); s.GetTokensMilli() != 500 {
		t.Fatalf("tokens at +250ms %d, want 500", s.GetTokensMilli())
	}
	// A new rate refills the bucket; without a burst it is the rate's
	// tasks per second, at least one.
	h.one(limitsCmd(at(time.Hour+250*time.Millisecond), "q", "a", nil, u64(500), u32(0)), pb.Code_CODE_OK)
	if got := h.claim(at(time.Hour+250*time.Millisecond), "q", "a", 10); len(got) != 1 {
		t.Fatalf("after a new rate of 0.5/s took %d, want 1", len(got))
	}
	if got := h.claim(at(time.Hour+2249*time.Millisecond), "q", "a", 10); len(got) != 0 {
		t.Fatalf("0.5/s gave a token before 2 s: %d", len(got))
	}
	if got := h.claim(at(time.Hour+2250*time.Millisecond), "q", "a", 10); len(got) != 1 {
		t.Fatalf("0.5/s gave no token after 2 s: %d", len(got))
	}
}

// Test_RateAndConcurrency: the tighter limit wins, and a claim limited to
// nothing by concurrency spends no token.
func Test_RateAndConcurrency(t *testing.T) {
	h := limitsHarness(t)
	h.fill(at(0), "q", "a", 10)
	h.one(limitsCmd(at(0), "q", "a", u32(2), u64(1000), u32(5)), pb.Code_CODE_OK)
	run := h.claim(at(0), "q", "a", 10)
	if len(run) != 2 {
		t.Fatalf("took %d, want 2 (concurrency)", len(run))
	}
	if got := h.claim(at(0), "q", "a", 10); len(got) != 0 {
		t.Fatalf("took %d over the concurrency limit", len(got))
	}
	for _, tk := range run {
		h.one(completeCmd(at(0), tk.GetId(), tk.GetFence()), pb.Code_CODE_OK)
	}
	if got := h.claim(at(0), "q", "a", 10); len(got) != 2 {
		t.Fatalf("took %d, want 2 (3 tokens left, concurrency 2)", len(got))
	}
}

// Test_TenantConcurrencyLimit: a tenant's limit counts its running tasks
// across its queues, those that ran before the latch too, and leaves
// other tenants alone.
func Test_TenantConcurrencyLimit(t *testing.T) {
	h := queueHarness(t) // level 7: no running count yet
	h.fill(at(0), "a", "acme", 4)
	h.fill(at(0), "b", "acme", 4)
	h.fill(at(0), "a", "other", 4)
	old := h.claimOne(at(0), "a", "acme") // running before the latch
	h.do(latchCmd(LevelLimits))
	h.one(limitsCmd(at(0), "", "acme", u32(3), nil, nil), pb.Code_CODE_OK)
	h.one(limitsCmd(at(0), "", "acme", u32(3), nil, nil), pb.Code_CODE_ALREADY_DONE)
	if got := h.claim(at(0), "a", "acme", 5); len(got) != 2 {
		t.Fatalf("queue a took %d, want 2 (limit 3, one running from before the latch)", len(got))
	}
	if got := h.claim(at(0), "b", "acme", 5); len(got) != 0 {
		t.Fatalf("queue b took %d over its tenant's limit", len(got))
	}
	if got := h.claim(at(0), "a", "other", 5); len(got) != 4 {
		t.Fatalf("another tenant took %d, want 4", len(got))
	}
	s := h.stats("b", "acme")
	if s.GetTenantMaxRunning() != 3 || s.GetTenantRunning() != 3 {
		t.Fatalf("stats %v", s)
	}
	var events []Event
	h.f.SetObserver(func(e Event) { events = append(events, e) })
	h.one(completeCmd(at(0), old.GetId(), old.GetFence()), pb.Code_CODE_OK)
	if len(events) != 1 || !slices.Equal(events[0].Freed, []string{"acme"}) {
		t.Fatalf("events after a submit %+v, want acme freed", events)
	}
	if got := h.claim(at(0), "b", "acme", 5); len(got) != 1 {
		t.Fatalf("queue b took %d after a task ended, want 1", len(got))
	}
	h.one(limitsCmd(at(0), "", "acme", u32(0), nil, nil), pb.Code_CODE_OK)
	if got := h.claim(at(0), "b", "acme", 5); len(got) != 3 {
		t.Fatalf("queue b took %d after the limit was cleared, want 3", len(got))
	}
	checkKeyspace(t, h.f)
}

// Test_TenantRecordWaitsForItsLevel: before the latch the usage record is
// version 1, byte for byte what a level-7 build writes; from it, version 2.
func Test_TenantRecordWaitsForItsLevel(t *testing.T) {
	h := queueHarness(t)
	h.fill(at(0), "q", "a", 2)
	h.claimOne(at(0), "q", "a")
	version := func() byte {
		r, release, err := h.f.reader()
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		v, c, err := r.Get(storage.TenantKey("a"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return v[0]
	}
	if v := version(); v != 1 {
		t.Fatalf("record version %d before the latch", v)
	}
	h.do(latchCmd(LevelLimits))
	if v := version(); v != 2 {
		t.Fatalf("record version %d after the latch", v)
	}
	checkKeyspace(t, h.f)
}

// Test_SetQueueLimitsRule: absent fields keep their value, the same values
// again are ALREADY_DONE, clearing every limit removes the record, and a
// queue with limits is listed before its first task.
func Test_SetQueueLimitsRule(t *testing.T) {
	h := limitsHarness(t)
	h.one(limitsCmd(at(0), "q", "a", u32(4), nil, nil), pb.Code_CODE_OK)
	h.one(limitsCmd(at(0), "q", "a", nil, u64(1500), nil), pb.Code_CODE_OK)
	h.one(limitsCmd(at(0), "q", "a", u32(4), u64(1500), nil), pb.Code_CODE_ALREADY_DONE)
	s := h.stats("q", "a")
	if s.GetMaxRunning() != 4 || s.GetRateMilli() != 1500 || s.GetBurst() != 1 || s.GetTokensMilli() != 1000 {
		t.Fatalf("stats %v", s)
	}
	h.one(limitsCmd(at(0), "q", "a", u32(0), u64(0), nil), pb.Code_CODE_OK)
	r, release, err := h.f.reader()
	if err != nil {
		t.Fatal(err)
	}
	_, c, err := r.Get(storage.QueueConfigKey("q", "a"))
	if err == nil {
		_ = c.Close()
	}
	release()
	if err == nil {
		t.Fatal("a queue without limits kept its configuration record")
	}
	if s := h.stats("q", "a"); s.GetMaxRunning() != 0 || s.GetRateMilli() != 0 || s.GetBurst() != 0 {
		t.Fatalf("stats after clearing %v", s)
	}
}

// Test_SetQueueLimitsInvalid: bad values are a FieldError naming the field.
func Test_SetQueueLimitsInvalid(t *testing.T) {
	h := limitsHarness(t)
	for _, c := range []struct {
		cmd   *pb.Command
		field string
	}{
		{limitsCmd(at(0), "q", "a", nil, nil, nil), "max_running"},
		{limitsCmd(at(0), "q", "a", nil, u64(MaxRateMilli+1), nil), "rate_milli"},
		{limitsCmd(at(0), "q", "a", nil, u64(1), u32(MaxBurst+1)), "burst"},
		{limitsCmd(at(0), "", "a", u32(1), u64(1000), nil), "rate_milli"},
		{limitsCmd(at(0), "", "a", nil, nil, nil), "max_running"},
		{limitsCmd(at(0), "q/x", "a", u32(1), nil, nil), "queue"},
	} {
		res := h.apply(c.cmd)
		if res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT || res.GetErrorField() != c.field {
			t.Errorf("%v: %v on %q, want INVALID_ARGUMENT on %q", c.cmd.GetSetQueueLimits(), res.GetErrorCode(), res.GetErrorField(), c.field)
		}
	}
}

// Test_LimitedClaimLeavesNoTrace: a claim the limits leave empty writes
// nothing but the applied index and time, like a claim of an empty queue.
func Test_LimitedClaimLeavesNoTrace(t *testing.T) {
	h := limitsHarness(t)
	h.fill(at(0), "q", "a", 4)
	h.one(limitsCmd(at(0), "q", "a", u32(1), u64(1000), u32(1)), pb.Code_CODE_OK)
	h.claimOne(at(0), "q", "a")
	before := dumpKeys(t, h.f)
	if got := h.claim(at(time.Minute), "q", "a", 3); len(got) != 0 {
		t.Fatalf("took %d", len(got))
	}
	if after := dumpKeys(t, h.f); !maps.Equal(before, after) {
		t.Fatalf("a limited claim changed the keyspace:\n%q\n%q", before, after)
	}
}

// dumpKeys is every key and value but the FSM's metadata (m/).
func dumpKeys(t *testing.T, f *FSM) map[string]string {
	r, release, err := f.reader()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	out := map[string]string{}
	err = storage.Scan(r, []byte{0}, []byte{0xff}, 0, func(k, v []byte) error {
		if !bytes.HasPrefix(k, []byte("m/")) {
			out[string(k)] = string(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Test_RunningEndWakesItsQueue: a running task that ends names its queue
// in the Event when tasks wait there, so long polls that a concurrency
// limit held back look again.
func Test_RunningEndWakesItsQueue(t *testing.T) {
	h := limitsHarness(t)
	h.fill(at(0), "q", "a", 3)
	h.one(limitsCmd(at(0), "q", "a", u32(1), nil, nil), pb.Code_CODE_OK)
	run := h.claimOne(at(0), "q", "a")
	var events []Event
	h.f.SetObserver(func(e Event) { events = append(events, e) })
	h.one(completeCmd(at(0), run.GetId(), run.GetFence()), pb.Code_CODE_OK)
	if len(events) != 1 || len(events[0].Pending) != 1 || events[0].Pending[0].Pending != 2 {
		t.Fatalf("events %+v, want q/a with 2 pending", events)
	}
}

// limits sets, changes or clears a queue's concurrency or rate limit, or
// a tenant's concurrency limit, tight enough that claims meet them.
func (w *workload) limits(now int64) *pb.Command {
	q := w.queue()
	pick := func() *uint32 {
		if w.pct(50) {
			return nil
		}
		return u32(uint32(w.rng.IntN(4)))
	}
	if w.pct(25) {
		return limitsCmd(now, "", q.Tenant, u32(uint32(w.rng.IntN(6))), nil, nil)
	}
	var rate *uint64
	if w.pct(50) {
		rate = u64(uint64(w.rng.IntN(3000)))
	}
	c := limitsCmd(now, q.Queue, q.Tenant, pick(), rate, pick())
	if c.GetSetQueueLimits().MaxRunning == nil && rate == nil && c.GetSetQueueLimits().Burst == nil {
		c.GetSetQueueLimits().MaxRunning = u32(2)
	}
	return c
}
