package fsm

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// reclaimed enqueues one task, claims it (fence f1), lets the lease expire,
// reaps it and claims it again (fence f2). It returns the id, f1, f2 and
// the time after the second claim.
func reclaimed(t *testing.T, h *harness) (string, uint64, uint64, int64) {
	t.Helper()
	id := h.enqueue(at(0), nt("q", "t", 0))[0]
	first := h.claimOne(at(0), "q", "t")
	expired := first.GetLeaseUntil()
	items, err := h.f.ExpiredLeases(expired, 10)
	if err != nil || len(items) != 1 || items[0].GetFence() != first.GetFence() {
		t.Fatalf("ExpiredLeases = %v, %v", items, err)
	}
	h.one(reapCmd(expired, items...), pb.Code_CODE_OK)
	second := h.claimOne(expired, "q", "t")
	if second.GetId() != id {
		t.Fatalf("reclaimed %s, want %s", second.GetId(), id)
	}
	return id, first.GetFence(), second.GetFence(), expired
}

// Test_StaleFenceRejected: after a reap and a new claim, the first worker's
// heartbeat, submit and nack are refused and change nothing; the new
// worker's succeed.
func Test_StaleFenceRejected(t *testing.T) {
	cases := []struct {
		name string
		cmd  func(now int64, id string, fence uint64) *pb.Command
	}{
		{"heartbeat", func(now int64, id string, fence uint64) *pb.Command {
			return heartbeatCmd(now, &pb.HeartbeatItem{TaskId: id, Fence: fence, Progress: []byte("50%"), HasProgress: true})
		}},
		{"submit", func(now int64, id string, fence uint64) *pb.Command { return completeCmd(now, id, fence) }},
		{"submit failed", func(now int64, id string, fence uint64) *pb.Command {
			return submitCmd(now, id, fence, pb.Outcome_OUTCOME_FAILED, "")
		}},
		{"nack", func(now int64, id string, fence uint64) *pb.Command { return nackCmd(now, id, fence, 0, "stale") }},
		{"reap", func(now int64, id string, fence uint64) *pb.Command {
			return reapCmd(now+int64(time.Hour), &pb.ReapItem{TaskId: id, Fence: fence})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			id, f1, f2, now := reclaimed(t, h)
			if f2 <= f1 {
				t.Fatalf("fence after reclaim %d, not above %d", f2, f1)
			}
			before := h.task(id)
			beforeHash := stateHash(t, h.f)
			for _, fence := range []uint64{f1, f2 + 1, f1 - 1} {
				it := h.one(c.cmd(now, id, fence), pb.Code_CODE_STALE_FENCE)
				// A stale writer learns only that it is stale: not the
				// current fence (it could retry with it), nor the state.
				if it.GetFence() != 0 || it.GetState() != pb.TaskState_TASK_STATE_UNSPECIFIED ||
					strings.Contains(it.GetDetail(), strconv.FormatUint(f2, 10)) {
					t.Fatalf("fence %d: stale answer gives away the claim: %v", fence, it)
				}
			}
			if after := h.task(id); !proto.Equal(before, after) {
				t.Fatalf("stale command changed the task:\n%v\n%v", before, after)
			}
			if stateHash(t, h.f) != beforeHash {
				t.Fatal("stale command changed the keyspace")
			}
			h.one(c.cmd(now, id, f2), pb.Code_CODE_OK)
			h.one(c.cmd(now, "00000000000000ff0000", f2), pb.Code_CODE_NOT_FOUND)
			checkKeyspace(t, h.f)
		})
	}
}

// Test_FencesIncreaseAcrossClaims: each claim of a task gets a strictly
// larger fence, equal to its log index, whether the task came back by
// reap or by nack.
func Test_FencesIncreaseAcrossClaims(t *testing.T) {
	h := newHarness(t)
	id := h.enqueue(at(0), nt("q", "t", 0), nt("q", "other", 0))[0]
	now := at(0)
	var last uint64
	for i := 0; i < 4; i++ {
		c := h.claimOne(now, "q", "t")
		if c.GetId() != id || c.GetFence() <= last || c.GetFence() != h.index || c.GetClaims() != uint32(i+1) {
			t.Fatalf("claim %d: id %s fence %d (index %d, previous %d) claims %d", i, c.GetId(), c.GetFence(), h.index, last, c.GetClaims())
		}
		last = c.GetFence()
		h.enqueue(now, nt("q", "other", 0)) // entries in between move the index on
		if i%2 == 0 {
			now = c.GetLeaseUntil()
			h.one(reapCmd(now, &pb.ReapItem{TaskId: id, Fence: last}), pb.Code_CODE_OK)
		} else {
			h.one(nackCmd(now, id, last, 0, ""), pb.Code_CODE_OK)
		}
	}
}

// Test_DoubleSubmit: Submit is compare-and-set. The same submit again is
// answered ALREADY_DONE and the first result stays.
func Test_DoubleSubmit(t *testing.T) {
	for _, outcome := range []pb.Outcome{pb.Outcome_OUTCOME_COMPLETED, pb.Outcome_OUTCOME_FAILED} {
		t.Run(outcome.String(), func(t *testing.T) {
			h := newHarness(t)
			id := h.enqueue(at(0), nt("q", "t", 0))[0]
			c := h.claimOne(at(0), "q", "t")
			h.one(submitCmd(at(time.Second), id, c.GetFence(), outcome, "first"), pb.Code_CODE_OK)
			done := h.task(id)
			before := stateHash(t, h.f)
			for _, o := range []pb.Outcome{pb.Outcome_OUTCOME_COMPLETED, pb.Outcome_OUTCOME_FAILED} {
				it := h.one(submitCmd(at(2*time.Second), id, c.GetFence(), o, "second"), pb.Code_CODE_ALREADY_DONE)
				if it.GetState() != done.GetState() {
					t.Fatalf("answer state %v, want %v", it.GetState(), done.GetState())
				}
			}
			h.one(submitCmd(at(2*time.Second), id, c.GetFence()+1, outcome, "other fence"), pb.Code_CODE_STALE_FENCE)
			if got := h.task(id); !proto.Equal(got, done) || !bytes.Equal(got.GetResult(), []byte("first")) {
				t.Fatalf("result overwritten: %q", got.GetResult())
			}
			if stateHash(t, h.f) != before {
				t.Fatal("second submit changed the keyspace")
			}
			s := h.stats("q", "t")
			if s.GetCompleted() != 1 || s.GetRunning() != 0 {
				t.Fatalf("stats %v", s)
			}
			checkKeyspace(t, h.f)
		})
	}
}

// Test_ReapSkipsExtendedLease: the leader scans at t1, a heartbeat lands
// before its Reap; the Reap, applied with now = t1, must spare the task.
func Test_ReapSkipsExtendedLease(t *testing.T) {
	h := newHarness(t)
	id := h.enqueue(at(0), nt("q", "t", 0))[0]
	c := h.claimOne(at(0), "q", "t")
	t1 := c.GetLeaseUntil()
	items, err := h.f.ExpiredLeases(t1, 100)
	if err != nil || len(items) != 1 {
		t.Fatalf("ExpiredLeases(t1) = %v, %v", items, err)
	}
	if early, _ := h.f.ExpiredLeases(t1-1, 100); len(early) != 0 {
		t.Fatalf("lease listed as expired 1ns early")
	}
	h.one(heartbeatCmd(t1, &pb.HeartbeatItem{TaskId: id, Fence: c.GetFence()}), pb.Code_CODE_OK)
	it := h.one(reapCmd(t1, items...), pb.Code_CODE_WRONG_STATE)
	if it.GetState() != pb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("answer state %v", it.GetState())
	}
	got := h.task(id)
	if got.GetState() != pb.TaskState_TASK_STATE_RUNNING || got.GetAttempts() != 0 || got.GetLeaseUntil() != t1+int64(lease) {
		t.Fatalf("after skipped reap: %v attempts %d lease_until %d", got.GetState(), got.GetAttempts(), got.GetLeaseUntil())
	}
	if left, _ := h.f.ExpiredLeases(t1, 100); len(left) != 0 {
		t.Fatalf("old lease entry left in l/: %v", left)
	}
	// At the new lease end the same reap succeeds.
	h.one(reapCmd(got.GetLeaseUntil(), items...), pb.Code_CODE_OK)
	checkKeyspace(t, h.f)
}

// Test_HeartbeatProgressAndLease: a heartbeat stores progress when it has
// some, extends lease_until to now + lease, never shortens it, and moves
// the lease index entry.
func Test_HeartbeatProgressAndLease(t *testing.T) {
	h := newHarness(t)
	id := h.enqueue(at(0), nt("q", "t", 0))[0]
	c := h.claimOne(at(0), "q", "t")
	hb := func(now int64, progress string, has bool, leaseNs time.Duration) *pb.Task {
		t.Helper()
		h.one(heartbeatCmd(now, &pb.HeartbeatItem{TaskId: id, Fence: c.GetFence(),
			Progress: []byte(progress), HasProgress: has, LeaseNs: int64(leaseNs)}), pb.Code_CODE_OK)
		return h.task(id)
	}
	steps := []struct {
		name         string
		now          int64
		progress     string
		has          bool
		lease        time.Duration
		wantProgress string
		wantUntil    int64
		wantLeaseNs  time.Duration
	}{
		{"claim lease kept", at(5 * time.Second), "10%", true, 0, "10%", at(15 * time.Second), lease},
		{"no progress keeps the old", at(6 * time.Second), "ignored", false, 0, "10%", at(16 * time.Second), lease},
		{"longer lease", at(7 * time.Second), "20%", true, time.Minute, "20%", at(67 * time.Second), time.Minute},
		{"shorter lease never shrinks", at(8 * time.Second), "30%", true, 2 * time.Second, "30%", at(67 * time.Second), 2 * time.Second},
		{"empty progress stored", at(9 * time.Second), "", true, 0, "", at(67 * time.Second), 2 * time.Second},
	}
	for _, s := range steps {
		got := hb(s.now, s.progress, s.has, s.lease)
		if string(got.GetProgress()) != s.wantProgress || got.GetLeaseUntil() != s.wantUntil || got.GetLeaseNs() != int64(s.wantLeaseNs) {
			t.Fatalf("%s: progress %q until %d lease %v; want %q %d %v", s.name, got.GetProgress(),
				got.GetLeaseUntil(), time.Duration(got.GetLeaseNs()), s.wantProgress, s.wantUntil, s.wantLeaseNs)
		}
		checkKeyspace(t, h.f)
	}
	// Progress survives a retry: the next worker sees the checkpoint.
	hb(at(10*time.Second), "checkpoint", true, 0)
	h.one(nackCmd(at(10*time.Second), id, c.GetFence(), 0, ""), pb.Code_CODE_OK)
	if again := h.claimOne(at(10*time.Second), "q", "t"); string(again.GetProgress()) != "checkpoint" {
		t.Fatalf("progress after retry %q", again.GetProgress())
	}
}

// Test_HeartbeatBatch: one command carries many items; each is answered on
// its own.
func Test_HeartbeatBatch(t *testing.T) {
	h := newHarness(t)
	h.enqueue(at(0), nt("q", "t", 0), nt("q", "t", 0))
	c := h.claim(at(0), "q", "t", 2)
	res := h.do(heartbeatCmd(at(time.Second),
		&pb.HeartbeatItem{TaskId: c[0].GetId(), Fence: c[0].GetFence()},
		&pb.HeartbeatItem{TaskId: c[1].GetId(), Fence: c[1].GetFence() + 1},
		&pb.HeartbeatItem{TaskId: "missing", Fence: 1},
		&pb.HeartbeatItem{TaskId: c[0].GetId(), Fence: c[0].GetFence(), LeaseNs: int64(time.Minute)},
	))
	want := []pb.Code{pb.Code_CODE_OK, pb.Code_CODE_STALE_FENCE, pb.Code_CODE_NOT_FOUND, pb.Code_CODE_OK}
	for i, it := range res.GetItems() {
		if it.GetCode() != want[i] {
			t.Errorf("item %d: %v, want %v", i, it.GetCode(), want[i])
		}
	}
	if got := h.task(c[0].GetId()).GetLeaseUntil(); got != at(time.Second+time.Minute) {
		t.Errorf("lease_until %d after the second item", got)
	}
	checkKeyspace(t, h.f)
}

// Test_RetentionPurge: a finished task and its idempotency key stay until
// expire_at and go at it; the key is then free for a new task.
func Test_RetentionPurge(t *testing.T) {
	const keep = 10 * time.Second
	finish := map[string]func(h *harness, id string) int64{
		"completed": func(h *harness, id string) int64 {
			c := h.claimOne(at(time.Second), "q", "t")
			h.one(completeCmd(at(2*time.Second), id, c.GetFence()), pb.Code_CODE_OK)
			return at(2 * time.Second)
		},
		"failed": func(h *harness, id string) int64 {
			c := h.claimOne(at(time.Second), "q", "t")
			h.one(submitCmd(at(2*time.Second), id, c.GetFence(), pb.Outcome_OUTCOME_FAILED, ""), pb.Code_CODE_OK)
			return at(2 * time.Second)
		},
		"cancelled": func(h *harness, id string) int64 {
			h.one(cancelCmd(at(3*time.Second), id), pb.Code_CODE_OK)
			return at(3 * time.Second)
		},
	}
	for name, fn := range finish {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			task := nt("q", "t", 0)
			task.IdempotencyKey = "job-1"
			task.RetentionNs = int64(keep)
			id := h.enqueue(at(0), task)[0]
			finishedAt := fn(h, id)
			expireAt := finishedAt + int64(keep)
			if got := h.task(id).GetExpireAt(); got != expireAt {
				t.Fatalf("expire_at %d, want %d", got, expireAt)
			}
			if _, expired, _ := h.f.HasDue(expireAt - 1); expired {
				t.Fatal("HasDue reports expiry 1ns early")
			}
			if res := h.do(purgeCmd(expireAt-1, 100)); len(res.GetItems()) != 0 {
				t.Fatalf("purge before expire_at removed %d", len(res.GetItems()))
			}
			h.task(id)
			h.one(enqueueCmd(expireAt-1, task), pb.Code_CODE_DUPLICATE)

			if _, expired, _ := h.f.HasDue(expireAt); !expired {
				t.Fatal("HasDue does not report expiry at expire_at")
			}
			h.one(purgeCmd(expireAt, 100), pb.Code_CODE_OK)
			if _, err := h.f.GetTask(id); err == nil {
				t.Fatal("purged task still readable")
			}
			if s := h.stats("q", "t"); s.GetCompleted() != 0 {
				t.Fatalf("stats after purge %v", s)
			}
			checkKeyspace(t, h.f)
			it := h.one(enqueueCmd(expireAt, task), pb.Code_CODE_OK)
			if it.GetTaskId() == id {
				t.Fatal("new enqueue after purge reused the purged id")
			}
			checkKeyspace(t, h.f)
		})
	}
}

// Test_PurgeLimitAndDeadLettersKept: purge honours its limit, oldest first,
// and never touches dead letters.
func Test_PurgeLimitAndDeadLettersKept(t *testing.T) {
	h := newHarness(t)
	var ids []string
	for i := 0; i < 5; i++ {
		task := nt("q", "t", 0)
		task.RetentionNs = int64(time.Second)
		id := h.enqueue(at(0), task)[0]
		h.one(cancelCmd(at(time.Duration(i)*time.Millisecond), id), pb.Code_CODE_OK)
		ids = append(ids, id)
	}
	dead := nt("q", "t", 0)
	dead.MaxAttempts = 1
	deadID := h.enqueue(at(0), dead)[0]
	c := h.claimOne(at(0), "q", "t")
	h.one(nackCmd(at(0), deadID, c.GetFence(), 0, ""), pb.Code_CODE_OK)

	res := h.do(purgeCmd(at(time.Hour), 2))
	if len(res.GetItems()) != 2 || res.GetItems()[0].GetTaskId() != ids[0] || res.GetItems()[1].GetTaskId() != ids[1] {
		t.Fatalf("purge limit 2 removed %v", res.GetItems())
	}
	if res := h.do(purgeCmd(at(time.Hour), 100)); len(res.GetItems()) != 3 {
		t.Fatalf("second purge removed %d, want 3", len(res.GetItems()))
	}
	if h.task(deadID).GetState() != pb.TaskState_TASK_STATE_DEAD {
		t.Fatal("dead letter purged")
	}
	checkKeyspace(t, h.f)
}

// Test_TimeNeverRunsBackwards: a command stamped earlier than the last one
// applied runs at the last time, and the time survives a restart.
func Test_TimeNeverRunsBackwards(t *testing.T) {
	h := newHarness(t)
	h.enqueue(at(time.Minute), nt("q", "t", 0))
	res := h.do(enqueueCmd(at(time.Second), nt("q", "t", 0)))
	if res.GetNow() != at(time.Minute) || h.f.Now() != at(time.Minute) {
		t.Fatalf("now %d / %d, want %d", res.GetNow(), h.f.Now(), at(time.Minute))
	}
	if got := h.task(res.GetItems()[0].GetTaskId()).GetCreatedAt(); got != at(time.Minute) {
		t.Fatalf("created_at %d, want the later time %d", got, at(time.Minute))
	}
	c := h.claimOne(0, "q", "t") // a command with no time at all
	if c.GetClaimedAt() != at(time.Minute) || c.GetLeaseUntil() != at(time.Minute)+int64(lease) {
		t.Fatalf("claim at %d until %d", c.GetClaimedAt(), c.GetLeaseUntil())
	}
	// A rejected command does not move time, even forwards.
	if r := h.apply(claimCmd(at(time.Hour), "q", "t", "", lease, 1)); r.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT {
		t.Fatalf("invalid claim: %v", r.GetErrorCode())
	}
	if h.f.Now() != at(time.Minute) {
		t.Fatalf("rejected command moved time to %d", h.f.Now())
	}
	h.reopen()
	if h.f.Now() != at(time.Minute) || h.f.AppliedIndex() != h.index {
		t.Fatalf("after reopen: now %d applied %d", h.f.Now(), h.f.AppliedIndex())
	}
	if res := h.do(enqueueCmd(at(time.Second), nt("q", "t", 0))); res.GetNow() != at(time.Minute) {
		t.Fatalf("after reopen a late command ran at %d", res.GetNow())
	}
	checkKeyspace(t, h.f)
}
