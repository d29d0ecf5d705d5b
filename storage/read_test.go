package storage

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// fixture stores, for queue q of tenants "acme" and "beta", tasks in every
// state with ids that tell where they are.
func fixture(t *testing.T) *pebble.DB {
	db := mustOpenDB(t)
	for _, tn := range []string{"acme", "beta"} {
		for i := 0; i < 7; i++ {
			mustStoreTask(t, db, &pb.Task{Id: fmt.Sprintf("%s-p%d", tn, i), Queue: "q", Tenant: tn,
				State: pb.TaskState_TASK_STATE_PENDING, Priority: uint32(9 - i/3), Seq: uint64(100 - i), CreatedAt: int64(50 + i)})
			mustStoreTask(t, db, &pb.Task{Id: fmt.Sprintf("%s-d%d", tn, i), Queue: "q", Tenant: tn,
				State: pb.TaskState_TASK_STATE_DELAYED, VisibleAt: int64(1000 + 10*i)})
			mustStoreTask(t, db, &pb.Task{Id: fmt.Sprintf("%s-r%d", tn, i), Queue: "q", Tenant: tn,
				State: pb.TaskState_TASK_STATE_RUNNING, LeaseUntil: int64(2000 - i), Fence: uint64(i + 1)})
			mustStoreTask(t, db, &pb.Task{Id: fmt.Sprintf("%s-x%d", tn, i), Queue: "q", Tenant: tn,
				State: pb.TaskState_TASK_STATE_DEAD})
		}
	}
	return db
}

// Test_ListTasksPaging walks every state of one tenant in pages of 3 and
// checks the order and that no page repeats or skips a task.
func Test_ListTasksPaging(t *testing.T) {
	db := fixture(t)
	cases := []struct {
		state pb.TaskState
		want  []string
	}{
		// Priority 9 (i 0..2) first, then 8, then 7; FIFO by seq inside.
		{pb.TaskState_TASK_STATE_PENDING, []string{"acme-p2", "acme-p1", "acme-p0", "acme-p5", "acme-p4", "acme-p3", "acme-p6"}},
		{pb.TaskState_TASK_STATE_DELAYED, []string{"acme-d0", "acme-d1", "acme-d2", "acme-d3", "acme-d4", "acme-d5", "acme-d6"}},
		{pb.TaskState_TASK_STATE_RUNNING, []string{"acme-r0", "acme-r1", "acme-r2", "acme-r3", "acme-r4", "acme-r5", "acme-r6"}},
		{pb.TaskState_TASK_STATE_DEAD, []string{"acme-x0", "acme-x1", "acme-x2", "acme-x3", "acme-x4", "acme-x5", "acme-x6"}},
	}
	for _, c := range cases {
		t.Run(c.state.String(), func(t *testing.T) {
			for _, limit := range []int{1, 3, 7, 8, 100} {
				var got []string
				cursor := ""
				for pages := 0; ; pages++ {
					if pages > len(c.want)+1 {
						t.Fatalf("limit %d: cursor never ended", limit)
					}
					tasks, next, err := ListTasks(Wrap(db), "q", "acme", c.state, cursor, limit, 0)
					if err != nil {
						t.Fatal(err)
					}
					if len(tasks) > limit {
						t.Fatalf("limit %d: page of %d", limit, len(tasks))
					}
					got = append(got, ids(tasks)...)
					if next == "" {
						break
					}
					cursor = next
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("limit %d: listed %v, want %v", limit, got, c.want)
				}
			}
		})
	}
}

// Test_ListTasksRefusesForeignCursor: a cursor is an opaque key; one taken
// from another tenant's listing must not widen the scan into that tenant's
// tasks.
func Test_ListTasksRefusesForeignCursor(t *testing.T) {
	db := fixture(t)
	_, acmeCursor, err := ListTasks(Wrap(db), "q", "acme", pb.TaskState_TASK_STATE_RUNNING, "", 1, 0)
	if err != nil || acmeCursor == "" {
		t.Fatalf("first page: cursor %q, %v", acmeCursor, err)
	}
	for _, cursor := range []string{acmeCursor, "a", "q/q/", string(RunningPrefix("q", "acme"))} {
		tasks, _, err := ListTasks(Wrap(db), "q", "beta", pb.TaskState_TASK_STATE_RUNNING, cursor, 100, 0)
		for _, task := range tasks {
			if task.GetTenant() != "beta" {
				t.Errorf("cursor %q: listing of tenant beta returned %s of tenant %s", cursor, task.GetId(), task.GetTenant())
			}
		}
		if !errors.Is(err, ErrBadCursor) {
			t.Errorf("cursor %q: err = %v, want ErrBadCursor", cursor, err)
		}
	}
}

func Test_ListTasksTerminalStateHasNoIndex(t *testing.T) {
	db := fixture(t)
	if _, _, err := ListTasks(Wrap(db), "q", "acme", pb.TaskState_TASK_STATE_COMPLETED, "", 10, 0); err == nil {
		t.Fatal("listing completed tasks succeeded; they have no per-queue index")
	}
}

func Test_StatsAndHeads(t *testing.T) {
	db := fixture(t)
	m := QueueMeta{Pending: 7, Delayed: 7, Running: 7, Dead: 7}
	mustCommit(t, db, func(b *pebble.Batch) error {
		if err := PutQueueMeta(b, "q", "acme", &m); err != nil {
			return err
		}
		return PutQueueMeta(b, "q", "beta", &QueueMeta{})
	})
	stats, err := Stats(Wrap(db), "", "acme")
	if err != nil || len(stats) != 1 {
		t.Fatalf("Stats(acme) = %v, %v", stats, err)
	}
	s := stats[0]
	if s.GetPending() != 7 || s.GetRunning() != 7 || s.GetDead() != 7 || s.GetDelayed() != 7 {
		t.Errorf("counters %v", s)
	}
	// The oldest head: p2 at priority 9 (created 52), p5 at 8 (55), p6 at 7 (56).
	if s.GetOldestPendingAt() != 52 {
		t.Errorf("oldest pending at %d, want 52", s.GetOldestPendingAt())
	}
	if all, err := Stats(Wrap(db), "q", ""); err != nil || len(all) != 2 {
		t.Errorf("Stats(q) = %v, %v; want 2 tenants", all, err)
	}
	if none, err := Stats(Wrap(db), "other", ""); err != nil || len(none) != 0 {
		t.Errorf("Stats(other) = %v, %v; want none", none, err)
	}
	// FirstPending seeks from the head hint: past it, the next seq.
	id, seq, ok, err := FirstPending(Wrap(db), "q", "acme", 9, 99)
	if err != nil || !ok || id != "acme-p1" || seq != 99 {
		t.Errorf("FirstPending(9, from 99) = %s, %d, %v, %v", id, seq, ok, err)
	}
	if _, _, ok, _ := FirstPending(Wrap(db), "q", "acme", 9, 101); ok {
		t.Error("FirstPending found a task past the last seq")
	}
}

func Test_TimeIndexScans(t *testing.T) {
	db := fixture(t)
	r := Wrap(db)
	leases, err := ExpiredLeases(r, 1996, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Two tenants, lease_until 1994..2000: those <= 1996 are i = 4, 5, 6.
	var got []string
	for _, e := range leases {
		got = append(got, fmt.Sprintf("%d:%s", e.At, e.ID))
	}
	want := []string{"1994:acme-r6", "1994:beta-r6", "1995:acme-r5", "1995:beta-r5", "1996:acme-r4", "1996:beta-r4"}
	if !slices.Equal(got, want) {
		t.Errorf("ExpiredLeases(1996) = %v, want %v", got, want)
	}
	if l, _ := ExpiredLeases(r, 1996, 2); len(l) != 2 {
		t.Errorf("limit 2 gave %d", len(l))
	}
	if l, _ := ExpiredLeases(r, 1993, 0); len(l) != 0 {
		t.Errorf("ExpiredLeases(1993) = %v, want none", l)
	}
	if d, _ := DueDelayed(r, 1010, 0); len(d) != 4 {
		t.Errorf("DueDelayed(1010) = %v, want 4", d)
	}
	if d, _ := DueDelayedInQueue(r, "q", "beta", 1010, 0); len(d) != 2 || d[0].ID != "beta-d0" {
		t.Errorf("DueDelayedInQueue(beta, 1010) = %v", d)
	}
	if e, _ := Expired(r, 1<<62, 0); len(e) != 0 {
		t.Errorf("Expired = %v, want none", e)
	}
}

func Test_ScanLimitAndStop(t *testing.T) {
	db := mustOpenDB(t)
	mustCommit(t, db, func(b *pebble.Batch) error {
		for i := 0; i < 10; i++ {
			if err := b.Set([]byte{'k', byte(i)}, nil, nil); err != nil {
				return err
			}
		}
		return nil
	})
	count := func(limit int, stopAt int) int {
		n := 0
		err := Scan(Wrap(db), []byte("k"), PrefixEnd([]byte("k")), limit, func(k, _ []byte) error {
			if n == stopAt {
				return ErrStop
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(0, -1); n != 10 {
		t.Errorf("no limit: %d", n)
	}
	if n := count(4, -1); n != 4 {
		t.Errorf("limit 4: %d", n)
	}
	if n := count(0, 3); n != 3 {
		t.Errorf("stop at 3: %d", n)
	}
	boom := errors.New("boom")
	if err := Scan(Wrap(db), nil, nil, 0, func(_, _ []byte) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("callback error = %v", err)
	}
}

func Test_TypedReads(t *testing.T) {
	db := mustOpenDB(t)
	r := Wrap(db)
	if _, err := GetTask(r, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetTask(missing) = %v", err)
	}
	if v, err := GetUint64(r, KeyApplied); err != nil || v != 0 {
		t.Errorf("GetUint64(missing) = %d, %v", v, err)
	}
	mustCommit(t, db, func(b *pebble.Batch) error {
		if err := SetUint64(b, KeyApplied, 1<<50); err != nil {
			return err
		}
		if err := b.Set(KeyNow, []byte("short"), nil); err != nil {
			return err
		}
		return b.Set([]byte("t/bad"), []byte{0xff, 0xff}, nil)
	})
	if v, err := GetUint64(r, KeyApplied); err != nil || v != 1<<50 {
		t.Errorf("GetUint64 = %d, %v", v, err)
	}
	if _, err := GetUint64(r, KeyNow); err == nil {
		t.Error("GetUint64 of a 5-byte value succeeded")
	}
	if _, err := GetTask(r, "bad"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("GetTask of garbage = %v, want a decode error", err)
	}
}

// Issue 9: a Stats answer grew with the number of queues, without bound.
// A page stops at maxBytes (at least one entry), and the cursor lists each
// queue once.
func Test_StatsPagesStopAtBudget(t *testing.T) {
	db := mustOpenDB(t)
	const n = 300
	b := db.NewBatch()
	for i := 0; i < n; i++ {
		q := fmt.Sprintf("%s-%04d", strings.Repeat("q", 100), i)
		if err := PutQueueMeta(b, q, "acme", &QueueMeta{Dead: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(nil); err != nil {
		t.Fatal(err)
	}
	const budget = 4 << 10
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("cursor never ended")
		}
		out, next, err := StatsPage(Wrap(db), "", "", cursor, budget)
		if err != nil {
			t.Fatal(err)
		}
		if size := proto.Size(&pb.StatsResponse{Queues: out}); len(out) > 1 && size > budget {
			t.Fatalf("page of %d queues is %d bytes > %d", len(out), size, budget)
		}
		for _, s := range out {
			if seen[s.GetQueue()] {
				t.Fatalf("queue %s listed twice", s.GetQueue())
			}
			seen[s.GetQueue()] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != n {
		t.Fatalf("listed %d of %d queues", len(seen), n)
	}
	all, err := Stats(Wrap(db), "", "")
	if err != nil || len(all) != n {
		t.Fatalf("unbounded Stats: %d queues, %v", len(all), err)
	}
}
