package fsm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// ClaimAllowance is the reference the claim view is held to, read from
// Pebble as claim admission read it before the view: how many tasks a
// claim of the queue may take now by its pause and limits (math.MaxInt
// when nothing limits it) and, when the rate limit leaves none, when the
// next token is due (Unix ns; 0 otherwise). The FSM's own time is used
// when later than now, as apply would.
func (f *FSM) ClaimAllowance(queue, tenant string, now int64) (n int, next int64, err error) {
	r, release, err := f.view()
	if err != nil {
		return 0, 0, err
	}
	defer release()
	cfg, err := storage.GetQueueConfig(r, queue, tenant)
	if err != nil || cfg.GetPaused() {
		return 0, 0, err
	}
	m, err := storage.GetQueueMeta(r, queue, tenant)
	if err != nil {
		return 0, 0, err
	}
	u, err := storage.GetTenantUsage(r, tenant)
	if err != nil {
		return 0, 0, err
	}
	n, next = allowance(cfg, m.Running, u, max(now, f.now.Load()), math.MaxInt)
	return n, next, nil
}

// claimableFromPebble is what the leader's claim admission asked before
// the claim view: the queue's pause and limits (ClaimAllowance), its
// counts (Counts) and, with nothing pending and something delayed, the
// delayed head (ListTasks). ClaimView must answer the same.
//
// keyed is keyedClaimableFromPebble's answer: for a keyed queue with tasks
// pending, a claim takes at most the tasks of keys below their limit.
func claimableFromPebble(t testing.TB, f *FSM, keyed map[QueueRef]uint64, ref QueueRef, now int64) (int, bool, int64) {
	t.Helper()
	allow, nextToken, err := f.ClaimAllowance(ref.Queue, ref.Tenant, now)
	if err != nil {
		t.Fatal(err)
	}
	if allow == 0 {
		return 0, false, nextToken
	}
	p, delayed, err := f.Counts(ref.Queue, ref.Tenant)
	if err != nil {
		t.Fatal(err)
	}
	if free, ok := keyed[ref]; ok && p > 0 {
		return int(min(free, uint64(allow))), false, 0
	}
	if p > 0 || delayed == 0 {
		return int(min(p, uint64(allow))), false, 0
	}
	head, _, err := f.ListTasks(ref.Queue, ref.Tenant, pb.TaskState_TASK_STATE_DELAYED, "", 1)
	if err != nil || len(head) == 0 {
		t.Fatalf("%v: %d delayed, head %v, %v", ref, delayed, head, err)
	}
	vis := head[0].GetVisibleAt()
	return 0, vis <= now, vis
}

// keyedClaimableFromPebble is how many of each keyed queue's pending tasks
// a claim could take under the per-key limits, from keyed queues built
// afresh out of Pebble's records.
func keyedClaimableFromPebble(t testing.TB, f *FSM) map[QueueRef]uint64 {
	t.Helper()
	fresh := keyedFromPebble(t, f)
	m := make(map[QueueRef]uint64, len(fresh.queues))
	for ref, kq := range fresh.queues {
		m[ref] = uint64(max(kq.claimable, 0))
	}
	return m
}

// checkClaimView fails when f's claim view differs from one built from
// Pebble now, or when ClaimView answers anything else than the Pebble
// reads it replaces, for refs and every queue the view holds, at times
// around each delayed head and the FSM's time.
func checkClaimView(t testing.TB, f *FSM, refs ...QueueRef) {
	t.Helper()
	if f.claims.isStale() {
		t.Fatal("claim view is stale")
	}
	fresh := newClaimView()
	r, release, err := f.reader()
	if err != nil {
		t.Fatal(err)
	}
	// The delayed heads from an order rebuilt from the records, not from
	// the FSM's own (checkReadyOrder holds that one to the records too).
	order := newReadyOrder()
	if err = order.rebuild(r); err == nil {
		err = fresh.rebuild(r, order)
	}
	release()
	if err != nil {
		t.Fatal(err)
	}
	f.claims.mu.RLock()
	got, gotTenants := f.claims.queues, f.claims.tenants
	f.claims.mu.RUnlock()
	for ref, want := range fresh.queues {
		if g, ok := got[ref]; !ok || !queueViewEqual(g, want) {
			t.Fatalf("claim view of %v: %s (held %v), Pebble says %s", ref, g, ok, want)
		}
	}
	for ref, g := range got {
		if _, ok := fresh.queues[ref]; !ok {
			t.Fatalf("claim view holds %v (%s), Pebble has no such queue", ref, g)
		}
	}
	if len(gotTenants) != len(fresh.tenants) {
		t.Fatalf("claim view holds %d limited tenants, Pebble %d", len(gotTenants), len(fresh.tenants))
	}
	for tn, want := range fresh.tenants {
		if g := gotTenants[tn]; g != want {
			t.Fatalf("tenant %s: claim view %+v, Pebble %+v", tn, g, want)
		}
	}
	seen := map[QueueRef]bool{}
	for _, ref := range refs {
		seen[ref] = true
	}
	for ref := range got {
		if !seen[ref] {
			refs = append(refs, ref)
		}
	}
	keyed := keyedClaimableFromPebble(t, f)
	for _, ref := range refs {
		nows := []int64{f.Now(), f.Now() - int64(time.Second), f.Now() + int64(time.Minute)}
		if q := got[ref]; q.delayed > 0 {
			nows = append(nows, q.head-1, q.head, q.head+1)
		}
		for _, now := range nows {
			p, due, next := f.ClaimView(ref, now)
			wp, wdue, wnext := claimableFromPebble(t, f, keyed, ref, now)
			if p != wp || due != wdue || next != wnext {
				t.Fatalf("%v at %d: ClaimView (%d, %v, %d), Pebble reads (%d, %v, %d)", ref, now, p, due, next, wp, wdue, wnext)
			}
		}
	}
}

func (q queueView) String() string {
	return fmt.Sprintf("{pending %d delayed %d running %d head %d cfg {%v}}", q.pending, q.delayed, q.running, q.head, q.cfg)
}

func queueViewEqual(a, b queueView) bool {
	return a.pending == b.pending && a.delayed == b.delayed && a.running == b.running &&
		a.head == b.head && proto.Equal(a.cfg, b.cfg)
}

// Test_ClaimViewMatchesPebble runs the metamorphic workload (both its
// busy and its many-queue mix, limits and pauses included) and checks the
// claim view against Pebble: after every entry on one replica, after
// every random-sized batch on another (a batch adds and removes delayed
// tasks of one queue together), after a snapshot restored into a replica
// that held other state, and after a reopen.
func Test_ClaimViewMatchesPebble(t *testing.T) {
	for _, seed := range []uint64{*seedFlag &^ 1, *seedFlag | 1} {
		n := metamorphicOps() / 4
		refs := newWorkload(seed).queues
		a := newHarness(t)
		logs, _ := generate(t, a.f, seed, n, func(int) { checkClaimView(t, a.f, refs...) })

		b := newHarness(t)
		rng := rand.New(rand.NewPCG(seed, 7))
		for i := 0; i < len(logs); {
			k := min(1+rng.IntN(64), len(logs)-i)
			b.f.ApplyBatch(logs[i : i+k])
			i += k
			checkClaimView(t, b.f, refs...)
		}

		c := newHarness(t)
		c.f.ApplyBatch(logs[:n/2])
		if err := restoreFrom(c.f, mustSnapshot(t, a.f)); err != nil {
			t.Fatal(err)
		}
		checkClaimView(t, c.f, refs...)

		a.reopen()
		checkClaimView(t, a.f, refs...)
	}
}

// Test_ClaimViewStaleAfterApplyPanic: an apply that panics leaves the
// view marked stale, so ClaimView answers "due" (the Claim command then
// decides, as after a failed read), and the next batch rebuilds it.
func Test_ClaimViewStaleAfterApplyPanic(t *testing.T) {
	h := newHarness(t)
	ref := QueueRef{"q", "acme"}
	h.enqueue(t0, nt("q", "acme", 0))
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("an undecodable entry did not stop apply")
			}
		}()
		h.f.ApplyBatch([]*raft.Log{{Index: h.index + 1, Type: raft.LogCommand, Data: []byte{0xff, 0xff}}})
	}()
	if p, due, _ := h.f.ClaimView(ref, t0); p != 0 || !due {
		t.Fatalf("after a panicking apply ClaimView answered (%d, %v), want (0, true)", p, due)
	}
	h.enqueue(at(time.Second), nt("q", "acme", 0))
	checkClaimView(t, h.f, ref)
	if p, due, _ := h.f.ClaimView(ref, at(time.Second)); p != 2 || due {
		t.Fatalf("after the next batch ClaimView answered (%d, %v), want (2, false)", p, due)
	}
}

// BenchmarkClaimAdmission compares what the leader's claim admission
// reads per look at a queue: the Pebble reads it made before
// (ClaimAllowance, Counts, and ListTasks for the delayed head) and the
// claim view, for a queue with pending tasks and limits and for one with
// only delayed tasks, serially and from parallel readers while the apply
// goroutine applies enqueues and claims.
func BenchmarkClaimAdmission(b *testing.B) {
	h := newHarness(b)
	busy, later := QueueRef{"busy", "acme"}, QueueRef{"later", "acme"}
	for range 20 {
		tasks := make([]*pb.NewTask, 100)
		for i := range tasks {
			tasks[i] = nt(busy.Queue, busy.Tenant, uint32(i%3))
		}
		h.enqueue(t0, tasks...)
		d := nt(later.Queue, later.Tenant, 0)
		d.RunAt = at(time.Hour)
		h.enqueue(t0, d)
	}
	h.apply(limitsCmd(t0, busy.Queue, busy.Tenant, u32(1000), u64(1_000_000), nil))
	h.apply(limitsCmd(t0, "", "acme", u32(1000), nil, nil))
	pebbleLook := func(ref QueueRef) {
		if _, _, err := h.f.ClaimAllowance(ref.Queue, ref.Tenant, t0); err != nil {
			b.Fatal(err)
		}
		p, d, err := h.f.Counts(ref.Queue, ref.Tenant)
		if err != nil {
			b.Fatal(err)
		}
		if p == 0 && d > 0 {
			if _, _, err := h.f.ListTasks(ref.Queue, ref.Tenant, pb.TaskState_TASK_STATE_DELAYED, "", 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	viewLook := func(ref QueueRef) { h.f.ClaimView(ref, t0) }
	for _, ref := range []QueueRef{busy, later} {
		for _, how := range []struct {
			name string
			look func(QueueRef)
		}{{"pebble", pebbleLook}, {"view", viewLook}} {
			b.Run(ref.Queue+"/"+how.name, func(b *testing.B) {
				for b.Loop() {
					how.look(ref)
				}
			})
			b.Run(ref.Queue+"/"+how.name+"/parallel-with-apply", func(b *testing.B) {
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() { // the apply goroutine: an enqueue, then a claim of it
					defer close(done)
					for {
						select {
						case <-stop:
							return
						default:
						}
						h.enqueue(t0, nt("churn", "other", 0))
						h.claim(t0, "churn", "other", 1)
					}
				}()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						how.look(ref)
					}
				})
				close(stop)
				<-done
			})
		}
	}
}

// Test_ClaimViewAfterCountsTheTasksThatEnd: a claim riding on submits sees
// the running tasks they end as gone. Table rows are the limit that holds
// the queue: its own running limit, its tenant's, a per-key limit, and a
// rate limit, which ending tasks do not lift.
func Test_ClaimViewAfterCountsTheTasksThatEnd(t *testing.T) {
	ref := QueueRef{"q", "acme"}
	for _, c := range []struct {
		name  string
		setup func(h *harness)
		// view is ClaimViewAfter's count with freeing 0, 1 and 5, once
		// two tasks of the five run.
		view [3]int
	}{
		{"queue limit", func(h *harness) { h.do(limitsCmd(t0, "q", "acme", u32(2), nil, nil)) }, [3]int{0, 1, 2}},
		{"tenant limit", func(h *harness) { h.do(limitsCmd(t0, "", "acme", u32(3), nil, nil)) }, [3]int{1, 2, 3}},
		{"key limit", func(h *harness) {
			h.do(latchCmd(LevelFairQueues))
			h.do(setPerKeyCmd(t0, "q", "acme", 2, pb.QueueOrder_QUEUE_ORDER_FAIR))
		}, [3]int{0, 1, 3}},
		{"rate limit", func(h *harness) { h.do(limitsCmd(t0, "q", "acme", nil, u64(1), u32(2))) }, [3]int{0, 0, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			c.setup(h)
			for range 5 {
				h.enqueue(t0, keyedTask("q", "acme", "a"))
			}
			if got := h.claim(t0, "q", "acme", 2); len(got) != 2 {
				t.Fatalf("claimed %d, want 2", len(got))
			}
			for i, freeing := range []int{0, 1, 5} {
				if n, due, _ := h.f.ClaimViewAfter(ref, t0, freeing); n != c.view[i] || due {
					t.Errorf("freeing %d: %d claimable (due %v), want %d", freeing, n, due, c.view[i])
				}
			}
			if n0, _, _ := h.f.ClaimView(ref, t0); n0 != c.view[0] {
				t.Errorf("ClaimView %d, want ClaimViewAfter's with nothing freed, %d", n0, c.view[0])
			}
		})
	}
}
