package fsm

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// historyWorkload claims one task four times and ends the claims by nack,
// reap, release and a completing submit, with a heartbeat in the last; a
// second task fails by Submit. It returns both ids and the fences of the
// first task's claims.
func historyWorkload(h *harness, q string, base time.Duration) (done, failed string, fences []uint64) {
	h.t.Helper()
	at := func(d time.Duration) int64 { return t0 + int64(base+d) }
	nt1 := nt(q, "t", 5)
	nt1.MaxAttempts = 10
	done = h.enqueue(at(0), nt1)[0]
	c := h.claimOne(at(time.Second), q, "t")
	fences = append(fences, c.GetFence())
	h.one(nackCmd(at(2*time.Second), done, c.GetFence(), 0, "boom"), pb.Code_CODE_OK)
	c = h.claimOne(at(3*time.Second), q, "t")
	fences = append(fences, c.GetFence())
	h.one(reapCmd(at(3*time.Second+lease), &pb.ReapItem{TaskId: done, Fence: c.GetFence()}), pb.Code_CODE_OK)
	c = h.claimOne(at(20*time.Second), q, "t")
	fences = append(fences, c.GetFence())
	h.one(releaseCmd(at(21*time.Second), &pb.ReapItem{TaskId: done, Fence: c.GetFence()}), pb.Code_CODE_OK)
	c = h.claimOne(at(22*time.Second), q, "t")
	fences = append(fences, c.GetFence())
	h.one(heartbeatCmd(at(25*time.Second), &pb.HeartbeatItem{TaskId: done, Fence: c.GetFence()}), pb.Code_CODE_OK)
	h.one(completeCmd(at(26*time.Second), done, c.GetFence()), pb.Code_CODE_OK)

	failed = h.enqueue(at(30*time.Second), nt(q, "t", 0))[0]
	c = h.claimOne(at(31*time.Second), q, "t")
	sub := submitCmd(at(32*time.Second), failed, c.GetFence(), pb.Outcome_OUTCOME_FAILED, "")
	sub.GetSubmit().Error = "bad input"
	h.one(sub, pb.Code_CODE_OK)
	return done, failed, fences
}

// Test_HistoryRecordsEveryAttempt: once LevelAttempts is latched, each
// claim leaves one record on the task with its worker, fence, times and
// how it ended; the answer of a Claim carries none.
func Test_HistoryRecordsEveryAttempt(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(LevelAttempts))
	done, failed, f := historyWorkload(h, "q", 0)
	w := func(claim uint32, fence uint64, claimed, until, ended time.Duration, out pb.AttemptOutcome, err string) *pb.Attempt {
		return &pb.Attempt{Claim: claim, WorkerId: "w1", Fence: fence, ClaimedAt: at(claimed), LeaseUntil: at(until),
			EndedAt: at(ended), Outcome: out, Error: err}
	}
	want := []*pb.Attempt{
		w(1, f[0], time.Second, time.Second+lease, 2*time.Second, pb.AttemptOutcome_ATTEMPT_OUTCOME_NACKED, "boom"),
		w(2, f[1], 3*time.Second, 3*time.Second+lease, 3*time.Second+lease, pb.AttemptOutcome_ATTEMPT_OUTCOME_EXPIRED, ""),
		w(3, f[2], 20*time.Second, 20*time.Second+lease, 21*time.Second, pb.AttemptOutcome_ATTEMPT_OUTCOME_RELEASED, ""),
		w(4, f[3], 22*time.Second, 25*time.Second+lease, 26*time.Second, pb.AttemptOutcome_ATTEMPT_OUTCOME_COMPLETED, ""),
	}
	got := h.task(done).GetHistory()
	if len(got) != len(want) {
		t.Fatalf("history has %d attempts, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("attempt %d:\n got %v\nwant %v", i+1, got[i], want[i])
		}
	}
	fh := h.task(failed).GetHistory()
	if len(fh) != 1 || fh[0].GetOutcome() != pb.AttemptOutcome_ATTEMPT_OUTCOME_FAILED || fh[0].GetError() != "bad input" {
		t.Fatalf("failed task's history %v, want one FAILED attempt with its error", fh)
	}

	// A claim's answer is the task without its history: the worker needs
	// none, and it would show past fences to a worker.
	id := h.enqueue(at(40*time.Second), nt("q", "t", 0))[0]
	first := h.claimOne(at(41*time.Second), "q", "t")
	h.one(nackCmd(at(42*time.Second), id, first.GetFence(), 0, "again"), pb.Code_CODE_OK)
	second := h.claimOne(at(43*time.Second), "q", "t")
	if second.GetId() != id || len(second.GetHistory()) != 0 {
		t.Fatalf("claim answer of %s carries history %v", second.GetId(), second.GetHistory())
	}
	if n := len(h.task(id).GetHistory()); n != 2 {
		t.Fatalf("stored history of %s has %d attempts, want 2", id, n)
	}
	if open := h.task(id).GetHistory()[1]; open.GetEndedAt() != 0 || open.GetOutcome() != pb.AttemptOutcome_ATTEMPT_OUTCOME_UNSPECIFIED {
		t.Fatalf("running attempt recorded as ended: %v", open)
	}
}

// Test_HistoryIsBounded: a task keeps its last MaxHistory attempts, and an
// error is cut to MaxAttemptError bytes on a rune boundary.
func Test_HistoryIsBounded(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(LevelAttempts))
	task := nt("q", "t", 0)
	task.MaxAttempts = 100
	id := h.enqueue(t0, task)[0]
	long := strings.Repeat("é", MaxAttemptError) // 2 bytes a rune: the cut falls inside one
	const claims = MaxHistory + 5
	for i := range claims {
		c := h.claimOne(at(time.Duration(i)*time.Second), "q", "t")
		h.one(nackCmd(at(time.Duration(i)*time.Second+time.Millisecond), id, c.GetFence(), 0, long), pb.Code_CODE_OK)
	}
	hist := h.task(id).GetHistory()
	if len(hist) != MaxHistory {
		t.Fatalf("history holds %d attempts after %d claims, want %d", len(hist), claims, MaxHistory)
	}
	if first, last := hist[0].GetClaim(), hist[len(hist)-1].GetClaim(); first != claims-MaxHistory+1 || last != claims {
		t.Fatalf("history keeps claims %d..%d, want the last %d of %d", first, last, MaxHistory, claims)
	}
	for _, a := range hist {
		if e := a.GetError(); len(e) > MaxAttemptError || len(e) < MaxAttemptError-utf8.UTFMax || !utf8.ValidString(e) {
			t.Fatalf("attempt %d error: %d bytes (valid UTF-8 %v), want at most %d", a.GetClaim(), len(e), utf8.ValidString(e), MaxAttemptError)
		}
	}
	if got := h.task(id).GetLastError(); got != long {
		t.Fatalf("last_error cut too: %d bytes", len(got))
	}
	if n := proto.Size(h.task(id)); n > MaxTaskBytes {
		t.Fatalf("task with a full history is %d bytes > MaxTaskBytes", n)
	}
}

// Test_HistoryWaitsForItsLevel: until LevelAttempts is latched, this build
// writes exactly what a level-5 build writes (same keyspace hash on the
// same log), so replicas of both agree during a rolling upgrade. After
// the latch, claims leave records; a claim made before it leaves none
// when it ends.
func Test_HistoryWaitsForItsLevel(t *testing.T) {
	newer := newHarness(t)
	older := &harness{t: t, dir: t.TempDir(), opts: Options{MaxLevel: LevelCounters}}
	older.f = mustOpen(t, older.dir, older.opts)
	var running *pb.Task
	for _, h := range []*harness{newer, older} {
		h.do(latchCmd(LevelCounters))
		historyWorkload(h, "q", 0)
		totalsWorkload(h)
		h.enqueue(at(50*time.Second), nt("late", "t", 0))
		running = h.claimOne(at(51*time.Second), "late", "t")
	}
	if a, b := mustHash(t, newer.f), mustHash(t, older.f); a != b {
		t.Fatalf("before the latch the keyspaces differ: %s vs %s", a, b)
	}
	for _, q := range []string{"q", "late"} {
		ids, _, err := newer.f.ListTasks(q, "t", pb.TaskState_TASK_STATE_RUNNING, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range ids {
			if len(task.GetHistory()) != 0 {
				t.Fatalf("task %s has history before the latch", task.GetId())
			}
		}
	}
	if got := newer.stats("q", "t").GetTotals().GetReleased(); got != 0 {
		t.Fatalf("releases counted before the latch: %d", got)
	}

	newer.do(latchCmd(LevelAttempts))
	newer.one(completeCmd(at(52*time.Second), running.GetId(), running.GetFence()), pb.Code_CODE_OK)
	if hist := newer.task(running.GetId()).GetHistory(); len(hist) != 0 {
		t.Fatalf("a claim from before the latch ended with a record: %v", hist)
	}
	before := newer.stats("q2", "t").GetTotals()
	_, _, fences := historyWorkload(newer, "q2", time.Minute)
	if len(fences) != 4 {
		t.Fatal("workload changed")
	}
	after := newer.stats("q2", "t").GetTotals()
	if got := after.GetReleased() - before.GetReleased(); got != 1 {
		t.Fatalf("released total moved by %d after the latch, want 1", got)
	}
	if got := after.GetLeaseExpired() - before.GetLeaseExpired(); got != 1 {
		t.Fatalf("lease_expired total moved by %d, want 1", got)
	}
	newer.reopen()
	if got := newer.stats("q2", "t").GetTotals(); !proto.Equal(got, after) {
		t.Fatalf("totals after reopen %v, want %v", got, after)
	}
}

// FuzzTaskHistory: any task record that decodes (as storage.GetTask
// decodes t/<id>), claimed, renewed and ended under LevelAttempts, keeps
// at most MaxHistory attempts with exactly one open between claim and
// end, an error within MaxAttemptError, and encodes again.
func FuzzTaskHistory(f *testing.F) {
	full := &pb.Task{Id: "x", State: pb.TaskState_TASK_STATE_RUNNING, Fence: 40, Claims: 20, LeaseUntil: t0}
	for i := range MaxHistory + 2 {
		full.History = append(full.History, &pb.Attempt{Claim: uint32(i + 1), Fence: uint64(i + 1), WorkerId: "w",
			EndedAt: t0, Outcome: pb.AttemptOutcome_ATTEMPT_OUTCOME_NACKED, Error: "é"})
	}
	for _, task := range []*pb.Task{full, {Id: "y"}, {Id: "z", Fence: 3, History: []*pb.Attempt{{Fence: 3, Claim: 1}}}} {
		b, err := proto.Marshal(task)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "boom", int64(5))
	}
	f.Add([]byte{}, strings.Repeat("ü", 200), int64(-1))
	f.Fuzz(func(t *testing.T, record []byte, reason string, now int64) {
		task := &pb.Task{}
		if proto.Unmarshal(record, task) != nil || !utf8.ValidString(reason) || now <= 0 {
			return
		}
		tx := &txn{feature: LevelAttempts, now: now, index: task.GetFence() + 1}
		task.Fence, task.Claims, task.WorkerId, task.LeaseUntil = tx.index, task.GetClaims()+1, "w", now+1
		tx.openAttempt(task)
		if n := len(task.GetHistory()); n == 0 || n > MaxHistory {
			t.Fatalf("history of %d attempts after a claim", n)
		}
		if current(task) == nil {
			t.Fatal("no open attempt after a claim")
		}
		task.LeaseUntil = now + 2
		tx.renewAttempt(task)
		if got := current(task).GetLeaseUntil(); got != now+2 {
			t.Fatalf("renewed attempt lease %d, want %d", got, now+2)
		}
		tx.closeAttempt(task, pb.AttemptOutcome_ATTEMPT_OUTCOME_NACKED, reason)
		if current(task) != nil {
			t.Fatal("attempt still open after it ended")
		}
		last := task.GetHistory()[len(task.GetHistory())-1]
		if e := last.GetError(); len(e) > MaxAttemptError || !utf8.ValidString(e) || !strings.HasPrefix(reason, e) {
			t.Fatalf("attempt error %q from a reason of %d bytes", e, len(reason))
		}
		if _, err := proto.Marshal(task); err != nil {
			t.Fatalf("record no longer encodes: %v", err)
		}
	})
}
