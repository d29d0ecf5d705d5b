package fsm

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_ClaimFIFOWithinPriority covers the claim order: highest priority
// first, FIFO inside a priority, requeued tasks at the back of theirs.
func Test_ClaimFIFOWithinPriority(t *testing.T) {
	type task struct {
		name  string
		prio  uint32
		entry int // tasks with the same entry are enqueued in one command
	}
	cases := []struct {
		name  string
		tasks []task
		nack  string // claim this task first and nack it without delay
		want  []string
	}{
		{"FIFO across entries", []task{{"a", 5, 0}, {"b", 5, 1}, {"c", 5, 2}}, "", []string{"a", "b", "c"}},
		{"FIFO inside one entry", []task{{"a", 5, 0}, {"b", 5, 0}, {"c", 5, 0}}, "", []string{"a", "b", "c"}},
		{"priority first", []task{{"lo", 1, 0}, {"hi", 9, 1}, {"mid", 5, 2}}, "", []string{"hi", "mid", "lo"}},
		{"priority preempts older tasks", []task{{"a", 0, 0}, {"b", 0, 1}, {"urgent", 9, 2}, {"c", 0, 3}},
			"", []string{"urgent", "a", "b", "c"}},
		{"priorities interleaved in one entry", []task{{"a0", 0, 0}, {"a9", 9, 0}, {"b0", 0, 0}, {"b9", 9, 0}},
			"", []string{"a9", "b9", "a0", "b0"}},
		{"nacked task goes to the back of its priority", []task{{"a", 3, 0}, {"b", 3, 1}, {"c", 3, 2}, {"z", 2, 3}},
			"a", []string{"b", "c", "a", "z"}},
		{"zero priority is still claimable", []task{{"only", 0, 0}}, "", []string{"only"}},
	}
	for _, c := range cases {
		for _, batched := range []bool{false, true} {
			name := c.name
			if batched {
				name += "/one claim"
			}
			t.Run(name, func(t *testing.T) {
				h := newHarness(t)
				byID := map[string]string{}
				for e := 0; e <= c.tasks[len(c.tasks)-1].entry; e++ {
					var nts []*pb.NewTask
					var names []string
					for _, tk := range c.tasks {
						if tk.entry == e {
							nts = append(nts, nt("q", "t", tk.prio))
							names = append(names, tk.name)
						}
					}
					for i, id := range h.enqueue(at(time.Duration(e)*time.Second), nts...) {
						byID[id] = names[i]
					}
				}
				now := at(time.Minute)
				if c.nack != "" {
					first := h.claimOne(now, "q", "t")
					if byID[first.GetId()] != c.nack {
						t.Fatalf("first claim got %s, want %s", byID[first.GetId()], c.nack)
					}
					h.one(nackCmd(now, first.GetId(), first.GetFence(), 0, "retry"), pb.Code_CODE_OK)
				}
				var got []string
				if batched {
					for _, tk := range h.claim(now, "q", "t", uint32(len(c.tasks))) {
						got = append(got, byID[tk.GetId()])
					}
				} else {
					for range c.tasks {
						got = append(got, byID[h.claimOne(now, "q", "t").GetId()])
					}
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("claimed %v, want %v", got, c.want)
				}
				if rest := h.claim(now, "q", "t", 10); len(rest) != 0 {
					t.Errorf("queue not drained: %d more", len(rest))
				}
				checkKeyspace(t, h.f)
			})
		}
	}
}

// Test_DelayedInvisibleUntilTime: a delayed task cannot be claimed before
// its time and can at or after it, whether a claim or the mover promotes it.
func Test_DelayedInvisibleUntilTime(t *testing.T) {
	const d = 30 * time.Second
	cases := []struct {
		name      string
		task      *pb.NewTask
		visibleAt int64
	}{
		{"delay_ns", &pb.NewTask{Queue: "q", Tenant: "t", DelayNs: int64(d)}, at(d)},
		{"run_at", &pb.NewTask{Queue: "q", Tenant: "t", RunAt: at(d)}, at(d)},
		{"run_at wins over delay_ns", &pb.NewTask{Queue: "q", Tenant: "t", RunAt: at(d), DelayNs: int64(time.Hour)}, at(d)},
		{"run_at in the past is pending now", &pb.NewTask{Queue: "q", Tenant: "t", RunAt: at(-d)}, at(0)},
		{"run_at is exactly now", &pb.NewTask{Queue: "q", Tenant: "t", RunAt: at(0)}, at(0)},
	}
	for _, c := range cases {
		for _, via := range []string{"claim", "promote"} {
			t.Run(c.name+"/"+via, func(t *testing.T) {
				h := newHarness(t)
				id := h.enqueue(at(0), c.task)[0]
				wantState := pb.TaskState_TASK_STATE_DELAYED
				if c.visibleAt <= at(0) {
					wantState = pb.TaskState_TASK_STATE_PENDING
				}
				if got := h.task(id).GetState(); got != wantState {
					t.Fatalf("state after enqueue %v, want %v", got, wantState)
				}
				if c.visibleAt > at(0) {
					before := c.visibleAt - 1
					if via == "promote" {
						if res := h.do(promoteCmd(before, 100)); len(res.GetItems()) != 0 {
							t.Fatalf("promote 1ns early moved %d tasks", len(res.GetItems()))
						}
					}
					if got := h.claim(before, "q", "t", 1); len(got) != 0 {
						t.Fatalf("claimed 1ns before visible_at")
					}
					if via == "promote" {
						if res := h.do(promoteCmd(c.visibleAt, 100)); len(res.GetItems()) != 1 {
							t.Fatalf("promote at visible_at moved %d tasks", len(res.GetItems()))
						}
						if s := h.stats("q", "t"); s.GetPending() != 1 || s.GetDelayed() != 0 {
							t.Fatalf("after promote: %v", s)
						}
					}
				}
				got := h.claimOne(c.visibleAt, "q", "t")
				if got.GetId() != id {
					t.Fatalf("claimed %s, want %s", got.GetId(), id)
				}
				checkKeyspace(t, h.f)
			})
		}
	}
}

// Test_NackWithDelay: a nack counts an attempt and returns the task at once
// or after its delay, keeping the reason; at max attempts it dead-letters
// whatever the delay.
func Test_NackWithDelay(t *testing.T) {
	cases := []struct {
		name        string
		maxAttempts uint32
		delay       time.Duration
		wantState   pb.TaskState
	}{
		{"no delay", 3, 0, pb.TaskState_TASK_STATE_PENDING},
		{"with delay", 3, 5 * time.Second, pb.TaskState_TASK_STATE_DELAYED},
		{"last attempt dead-letters despite delay", 1, 5 * time.Second, pb.TaskState_TASK_STATE_DEAD},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			task := nt("q", "t", 0)
			task.MaxAttempts = c.maxAttempts
			id := h.enqueue(at(0), task)[0]
			claimed := h.claimOne(at(1*time.Second), "q", "t")
			it := h.one(nackCmd(at(2*time.Second), id, claimed.GetFence(), c.delay, "db timeout"), pb.Code_CODE_OK)
			if it.GetState() != c.wantState {
				t.Fatalf("state after nack %v, want %v", it.GetState(), c.wantState)
			}
			got := h.task(id)
			if got.GetAttempts() != 1 || got.GetLastError() != "db timeout" || got.GetWorkerId() != "" {
				t.Fatalf("after nack: attempts %d, last error %q, worker %q", got.GetAttempts(), got.GetLastError(), got.GetWorkerId())
			}
			checkKeyspace(t, h.f)
			if c.wantState == pb.TaskState_TASK_STATE_DEAD {
				return
			}
			back := at(2*time.Second + c.delay)
			if c.delay > 0 {
				if len(h.claim(back-1, "q", "t", 1)) != 0 {
					t.Fatal("claimed before the nack delay ended")
				}
			}
			again := h.claimOne(back, "q", "t")
			if again.GetId() != id || again.GetFence() <= claimed.GetFence() || again.GetClaims() != 2 {
				t.Fatalf("reclaim: %s fence %d claims %d", again.GetId(), again.GetFence(), again.GetClaims())
			}
		})
	}
}

// Test_DeadLetterAtMaxAttempts fails a task max_attempts times, by nack or
// by lease expiry, then replays it with RequeueDead.
func Test_DeadLetterAtMaxAttempts(t *testing.T) {
	for _, max := range []uint32{1, 2, 4} {
		for _, how := range []string{"nack", "reap"} {
			t.Run(fmt.Sprintf("%s/max=%d", how, max), func(t *testing.T) {
				h := newHarness(t)
				task := nt("q", "t", 0)
				task.MaxAttempts = max
				id := h.enqueue(at(0), task)[0]
				now := at(0)
				for i := uint32(1); i <= max; i++ {
					c := h.claimOne(now, "q", "t")
					if how == "nack" {
						h.one(nackCmd(now, id, c.GetFence(), 0, fmt.Sprint("attempt ", i)), pb.Code_CODE_OK)
					} else {
						now = c.GetLeaseUntil()
						h.one(reapCmd(now, &pb.ReapItem{TaskId: id, Fence: c.GetFence()}), pb.Code_CODE_OK)
					}
				}
				got := h.task(id)
				wantErr := "lease expired"
				if how == "nack" {
					wantErr = fmt.Sprint("attempt ", max)
				}
				if got.GetState() != pb.TaskState_TASK_STATE_DEAD || got.GetAttempts() != max || got.GetLastError() != wantErr {
					t.Fatalf("after %d failures: %v, attempts %d, last error %q", max, got.GetState(), got.GetAttempts(), got.GetLastError())
				}
				if len(h.claim(now, "q", "t", 1)) != 0 {
					t.Fatal("dead letter was claimable")
				}
				if s := h.stats("q", "t"); s.GetDead() != 1 || s.GetPending() != 0 {
					t.Fatalf("stats %v", s)
				}
				dead, _, err := h.f.ListTasks("q", "t", pb.TaskState_TASK_STATE_DEAD, "", 10)
				if err != nil || len(dead) != 1 || dead[0].GetId() != id {
					t.Fatalf("dead list %v, %v", dead, err)
				}
				checkKeyspace(t, h.f)

				it := h.one(requeueDeadCmd(now, id, "", "", 0), pb.Code_CODE_OK)
				if it.GetState() != pb.TaskState_TASK_STATE_PENDING {
					t.Fatalf("requeued state %v", it.GetState())
				}
				if got := h.task(id); got.GetAttempts() != 0 || got.GetFinishedAt() != 0 {
					t.Fatalf("requeued: attempts %d finished_at %d", got.GetAttempts(), got.GetFinishedAt())
				}
				h.one(requeueDeadCmd(now, id, "", "", 0), pb.Code_CODE_WRONG_STATE)
				if c := h.claimOne(now, "q", "t"); c.GetId() != id {
					t.Fatalf("claimed %s after requeue", c.GetId())
				}
				checkKeyspace(t, h.f)
			})
		}
	}
}

// Test_RequeueDeadByQueue replays the oldest dead letters of one queue, up
// to the limit, and leaves other tenants' alone.
func Test_RequeueDeadByQueue(t *testing.T) {
	h := newHarness(t)
	kill := func(tn string, n int) []string {
		var ids []string
		for i := 0; i < n; i++ {
			task := nt("q", tn, 0)
			task.MaxAttempts = 1
			id := h.enqueue(at(0), task)[0]
			c := h.claimOne(at(0), "q", tn)
			h.one(nackCmd(at(0), id, c.GetFence(), 0, "boom"), pb.Code_CODE_OK)
			ids = append(ids, id)
		}
		return ids
	}
	a := kill("a", 5)
	b := kill("b", 2)
	res := h.do(requeueDeadCmd(at(time.Second), "", "q", "a", 3))
	var got []string
	for _, it := range res.GetItems() {
		if it.GetCode() != pb.Code_CODE_OK {
			t.Fatalf("item %s: %v", it.GetTaskId(), it.GetCode())
		}
		got = append(got, it.GetTaskId())
	}
	if !slices.Equal(got, a[:3]) {
		t.Fatalf("requeued %v, want the oldest three %v", got, a[:3])
	}
	if s := h.stats("q", "a"); s.GetDead() != 2 || s.GetPending() != 3 {
		t.Fatalf("tenant a: %v", s)
	}
	if s := h.stats("q", "b"); s.GetDead() != 2 {
		t.Fatalf("tenant b: %v", s)
	}
	for _, id := range b {
		if h.task(id).GetState() != pb.TaskState_TASK_STATE_DEAD {
			t.Fatalf("tenant b's %s was requeued", id)
		}
	}
	h.one(requeueDeadCmd(at(time.Second), "nope", "", "", 0), pb.Code_CODE_NOT_FOUND)
	if res := h.do(requeueDeadCmd(at(time.Second), "", "q", "empty", 10)); len(res.GetItems()) != 0 {
		t.Fatalf("empty queue requeued %d", len(res.GetItems()))
	}
	checkKeyspace(t, h.f)
}

// Test_IdempotentEnqueue: a known key answers with the original id and
// stores nothing, inside an entry, across entries of one apply batch and
// across batches; keys of different tenants and queues are independent.
func Test_IdempotentEnqueue(t *testing.T) {
	keyed := func(q, tn, key string) *pb.NewTask {
		task := nt(q, tn, 0)
		task.IdempotencyKey = key
		return task
	}
	cases := []struct {
		name    string
		entries [][]*pb.NewTask
		batch   bool // apply all entries in one ApplyBatch
		want    []pb.Code
		same    [][2]int // pairs of item positions that must name the same task
		tasks   int
	}{
		{"separate entries", [][]*pb.NewTask{{keyed("q", "t", "k")}, {keyed("q", "t", "k")}}, false,
			[]pb.Code{pb.Code_CODE_OK, pb.Code_CODE_DUPLICATE}, [][2]int{{0, 1}}, 1},
		{"one entry", [][]*pb.NewTask{{keyed("q", "t", "k"), nt("q", "t", 0), keyed("q", "t", "k")}}, false,
			[]pb.Code{pb.Code_CODE_OK, pb.Code_CODE_OK, pb.Code_CODE_DUPLICATE}, [][2]int{{0, 2}}, 2},
		{"one apply batch", [][]*pb.NewTask{{keyed("q", "t", "k")}, {keyed("q", "t", "k")}}, true,
			[]pb.Code{pb.Code_CODE_OK, pb.Code_CODE_DUPLICATE}, [][2]int{{0, 1}}, 1},
		{"tenants are independent", [][]*pb.NewTask{{keyed("q", "a", "k")}, {keyed("q", "b", "k")}}, false,
			[]pb.Code{pb.Code_CODE_OK, pb.Code_CODE_OK}, nil, 2},
		{"queues are independent", [][]*pb.NewTask{{keyed("q1", "t", "k"), keyed("q2", "t", "k")}}, false,
			[]pb.Code{pb.Code_CODE_OK, pb.Code_CODE_OK}, nil, 2},
		{"no key never dedupes", [][]*pb.NewTask{{nt("q", "t", 0)}, {nt("q", "t", 0)}}, false,
			[]pb.Code{pb.Code_CODE_OK, pb.Code_CODE_OK}, nil, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			var items []*pb.ItemResult
			if c.batch {
				var logs []*raft.Log
				for _, e := range c.entries {
					h.index++
					logs = append(logs, entry(t, h.index, enqueueCmd(at(0), e...)))
				}
				for _, r := range h.f.ApplyBatch(logs) {
					items = append(items, r.(*pb.CommandResult).GetItems()...)
				}
			} else {
				for _, e := range c.entries {
					items = append(items, h.do(enqueueCmd(at(0), e...)).GetItems()...)
				}
			}
			for i, want := range c.want {
				if items[i].GetCode() != want {
					t.Errorf("item %d: %v, want %v", i, items[i].GetCode(), want)
				}
			}
			for _, p := range c.same {
				if items[p[0]].GetTaskId() != items[p[1]].GetTaskId() {
					t.Errorf("items %d and %d: ids %s and %s differ", p[0], p[1], items[p[0]].GetTaskId(), items[p[1]].GetTaskId())
				}
			}
			if n := len(readKeyspace(t, h.f).tasks); n != c.tasks {
				t.Errorf("%d tasks stored, want %d", n, c.tasks)
			}
			checkKeyspace(t, h.f)
		})
	}
}

// Test_IdempotentEnqueueOutlivesCompletion: the key answers DUPLICATE for
// as long as its task is kept, even once finished.
func Test_IdempotentEnqueueOutlivesCompletion(t *testing.T) {
	h := newHarness(t)
	task := nt("q", "t", 0)
	task.IdempotencyKey = "order-42"
	id := h.enqueue(at(0), task)[0]
	c := h.claimOne(at(0), "q", "t")
	h.one(completeCmd(at(time.Second), id, c.GetFence()), pb.Code_CODE_OK)
	it := h.one(enqueueCmd(at(time.Hour), task), pb.Code_CODE_DUPLICATE)
	if it.GetTaskId() != id || it.GetState() != pb.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("duplicate answered %s in %v, want %s completed", it.GetTaskId(), it.GetState(), id)
	}
}

// Test_TenantIsolation: a tenant's claims, stats and listings see only its
// own tasks, even in a queue of the same name.
func Test_TenantIsolation(t *testing.T) {
	h := newHarness(t)
	a := h.enqueue(at(0), nt("q", "acme", 9), nt("q", "acme", 0))
	b := h.enqueue(at(0), nt("q", "beta", 5))
	got := h.claim(at(time.Second), "q", "beta", 10)
	if len(got) != 1 || got[0].GetId() != b[0] || got[0].GetTenant() != "beta" {
		t.Fatalf("beta claimed %v, want only %s", got, b[0])
	}
	if len(h.claim(at(time.Second), "q", "beta", 10)) != 0 {
		t.Fatal("beta claimed acme's tasks")
	}
	if s := h.stats("q", "acme"); s.GetPending() != 2 || s.GetRunning() != 0 {
		t.Fatalf("acme stats %v", s)
	}
	if s := h.stats("q", "beta"); s.GetPending() != 0 || s.GetRunning() != 1 {
		t.Fatalf("beta stats %v", s)
	}
	list, _, err := h.f.ListTasks("q", "acme", pb.TaskState_TASK_STATE_PENDING, "", 10)
	if err != nil || len(list) != 2 || list[0].GetId() != a[0] {
		t.Fatalf("acme pending list %v, %v", list, err)
	}
	// A cursor of acme's listing cannot page into beta's (or vice versa).
	_, cursor, _ := h.f.ListTasks("q", "acme", pb.TaskState_TASK_STATE_PENDING, "", 1)
	if _, _, err := h.f.ListTasks("q", "beta", pb.TaskState_TASK_STATE_PENDING, cursor, 10); err == nil {
		t.Fatal("beta's listing accepted acme's cursor")
	}
	checkKeyspace(t, h.f)
}

// Test_Cancel: only tasks no worker holds can be cancelled.
func Test_Cancel(t *testing.T) {
	cases := []struct {
		name  string
		setup func(h *harness) string
		want  pb.Code
	}{
		{"pending", func(h *harness) string { return h.enqueue(at(0), nt("q", "t", 0))[0] }, pb.Code_CODE_OK},
		{"delayed", func(h *harness) string {
			task := nt("q", "t", 0)
			task.DelayNs = int64(time.Hour)
			return h.enqueue(at(0), task)[0]
		}, pb.Code_CODE_OK},
		{"running", func(h *harness) string {
			h.enqueue(at(0), nt("q", "t", 0))
			return h.claimOne(at(0), "q", "t").GetId()
		}, pb.Code_CODE_WRONG_STATE},
		{"completed", func(h *harness) string {
			h.enqueue(at(0), nt("q", "t", 0))
			c := h.claimOne(at(0), "q", "t")
			h.one(completeCmd(at(0), c.GetId(), c.GetFence()), pb.Code_CODE_OK)
			return c.GetId()
		}, pb.Code_CODE_WRONG_STATE},
		{"dead", func(h *harness) string {
			task := nt("q", "t", 0)
			task.MaxAttempts = 1
			h.enqueue(at(0), task)
			c := h.claimOne(at(0), "q", "t")
			h.one(nackCmd(at(0), c.GetId(), c.GetFence(), 0, "x"), pb.Code_CODE_OK)
			return c.GetId()
		}, pb.Code_CODE_WRONG_STATE},
		{"already cancelled", func(h *harness) string {
			id := h.enqueue(at(0), nt("q", "t", 0))[0]
			h.one(cancelCmd(at(0), id), pb.Code_CODE_OK)
			return id
		}, pb.Code_CODE_ALREADY_DONE},
		{"unknown", func(h *harness) string { return "0000000000000063" }, pb.Code_CODE_NOT_FOUND},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			id := c.setup(h)
			before := stateHash(t, h.f)
			h.one(cancelCmd(at(time.Minute), id), c.want)
			if c.want != pb.Code_CODE_OK {
				if after := stateHash(t, h.f); after != before {
					t.Fatalf("rejected cancel changed the keyspace")
				}
				return
			}
			got := h.task(id)
			if got.GetState() != pb.TaskState_TASK_STATE_CANCELLED || got.GetFinishedAt() != at(time.Minute) ||
				got.GetExpireAt() != at(time.Minute)+int64(pb.DefaultRetention) {
				t.Fatalf("cancelled task: %v finished %d expire %d", got.GetState(), got.GetFinishedAt(), got.GetExpireAt())
			}
			if len(h.claim(at(2*time.Hour), "q", "t", 1)) != 0 {
				t.Fatal("cancelled task was claimed")
			}
			checkKeyspace(t, h.f)
		})
	}
}

// Test_EmptyClaimLeavesNoTrace: polling a queue that has no tasks (or
// does not exist) writes nothing but the entry's metadata, so a worker
// with a misspelled queue does not create a queue that Stats lists forever.
func Test_EmptyClaimLeavesNoTrace(t *testing.T) {
	h := newHarness(t)
	h.enqueue(at(0), nt("q", "t", 0))
	before := stateHash(t, h.f)
	for _, q := range []string{"ghost", "q"} {
		tn := "t"
		if q == "q" {
			tn = "other-tenant"
		}
		if got := h.claim(at(time.Second), q, tn, 5); len(got) != 0 {
			t.Fatalf("claimed %d from an empty queue", len(got))
		}
	}
	if stateHash(t, h.f) != before {
		t.Fatal("an empty claim changed the keyspace")
	}
	if all, err := h.f.Stats("", ""); err != nil || len(all) != 1 {
		t.Fatalf("Stats lists %d queues, want only the real one: %v", len(all), all)
	}
	checkKeyspace(t, h.f)
}
