package fsm

import (
	"flag"
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
)

var seedFlag = flag.Uint64("fsm.seed", 20261122, "seed of the metamorphic and crash workloads")

// metamorphicOps is the log length: at least 10,000 commands in a normal
// run, fewer under -short.
//
// Under the race detector it is 4000: those tests apply on one goroutine,
// so the detector finds little in them, and at full size they were half
// of the package's time in `make test`. `make test` runs the package again
// without the detector, where they run at full length.
func metamorphicOps() int {
	switch {
	case testing.Short():
		return 2000
	case raceOn:
		return 4000
	}
	return 10000
}

// Test_MetamorphicDeterminism applies one random log to two FSMs, one
// entry by entry and one in random batch sizes: same answers, same
// keyspace hash. A snapshot taken mid-way restores into a third FSM that
// then catches up to the same hash, and a reopened FSM skips replayed
// entries without bumping any counter.
func Test_MetamorphicDeterminism(t *testing.T) {
	metamorphic(t, *seedFlag&^1)
}

// Test_MetamorphicDeterminismManyQueues is the same over 54 queues (an odd
// seed, newWorkload), so that queues often empty out and empty-queue
// removal runs in the middle of apply batches: with 6 busy queues it
// almost never did, and a removal that depended on batching went unseen.
func Test_MetamorphicDeterminismManyQueues(t *testing.T) {
	metamorphic(t, *seedFlag|1)
}

func metamorphic(t *testing.T, seed uint64) {
	t.Logf("seed %d (rerun with -fsm.seed=%d)", seed, seed)
	n := metamorphicOps()
	const tail = 300 // entries after the snapshot

	a := newHarness(t)
	var snap raft.FSMSnapshot
	logs, want := generate(t, a.f, seed, n+tail, func(i int) {
		if i == n-1 {
			var err error
			if snap, err = a.f.Snapshot(); err != nil {
				t.Fatal(err)
			}
			checkKeyspace(t, a.f)
		}
	})
	a.index = uint64(len(logs))
	hashA := mustHash(t, a.f)
	checkKeyspace(t, a.f)
	// The workload latches LevelAttempts at some point: the attempt
	// histories claims write from then on are part of what must agree.
	withHistory := 0
	for _, task := range readKeyspace(t, a.f).tasks {
		if len(task.GetHistory()) > 0 {
			withHistory++
		}
	}
	if withHistory == 0 {
		t.Fatal("the workload left no task with an attempt history")
	}
	// And the level-9 rules ran: claims ended by a cancel request and by
	// their execution deadline are part of what must agree. A short run
	// may latch level 9 too late to see both (seed 4 did).
	if c, to := cancelOutcomes(readKeyspace(t, a.f)); !testing.Short() && (c == 0 || to == 0) {
		t.Fatalf("the workload left %d cancelled and %d timed-out attempts; want some of each", c, to)
	}

	// Batched replica: same answers, same hash.
	b := newHarness(t)
	got := applyInBatches(b.f, logs, rand.New(rand.NewPCG(seed, 2)), 128)
	for i := range logs {
		if !answersEqual(want[i], got[i]) {
			t.Fatalf("entry %d (%v): answers differ\nsingle:  %v\nbatched: %v", logs[i].Index, logs[i].Type, want[i], got[i])
		}
	}
	if h := mustHash(t, b.f); h != hashA {
		t.Fatalf("batched replica hash %s, single %s", h, hashA)
	}
	if b.f.AppliedIndex() != a.f.AppliedIndex() || b.f.Now() != a.f.Now() {
		t.Fatalf("batched replica at %d/%d, single at %d/%d", b.f.AppliedIndex(), b.f.Now(), a.f.AppliedIndex(), a.f.Now())
	}

	// Snapshot taken at entry n, persisted after the tail was applied,
	// restored into a replica that had other state.
	sink := &bufSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	c := newHarness(t)
	c.f.ApplyBatch(logs[:n/3])
	if err := restoreFrom(c.f, sink.Bytes()); err != nil {
		t.Fatal(err)
	}
	if c.f.AppliedIndex() != uint64(n) {
		t.Fatalf("restored applied index %d, want %d", c.f.AppliedIndex(), n)
	}
	checkKeyspace(t, c.f)
	applyInBatches(c.f, logs, rand.New(rand.NewPCG(seed, 3)), 64) // entries <= n are skipped
	if h := mustHash(t, c.f); h != hashA || c.f.AppliedIndex() != a.f.AppliedIndex() {
		t.Fatalf("restored replica: hash %s at %d, want %s at %d", h, c.f.AppliedIndex(), hashA, a.f.AppliedIndex())
	}
	// A snapshot of the final state restores to the same hash too.
	d := newHarness(t)
	if err := restoreFrom(d.f, mustSnapshot(t, a.f)); err != nil {
		t.Fatal(err)
	}
	if h := mustHash(t, d.f); h != hashA || d.f.AppliedIndex() != a.f.AppliedIndex() || d.f.Now() != a.f.Now() {
		t.Fatalf("restore of final snapshot: hash %s at %d", h, d.f.AppliedIndex())
	}

	// Reopen and replay the last 100 entries: all skipped.
	counters := attempts(t, a.f)
	a.reopen()
	if a.f.AppliedIndex() != uint64(len(logs)) || mustHash(t, a.f) != hashA {
		t.Fatalf("after reopen: applied %d, hash changed", a.f.AppliedIndex())
	}
	replay := logs[len(logs)-100:]
	for _, out := range append(a.f.ApplyBatch(replay), a.f.Apply(replay[len(replay)-1])) {
		if out != nil {
			t.Fatalf("replayed entry answered %v", out)
		}
	}
	if mustHash(t, a.f) != hashA {
		t.Fatal("replaying applied entries changed the keyspace")
	}
	now := attempts(t, a.f)
	if len(now) != len(counters) {
		t.Fatalf("%d tasks after replay, %d before", len(now), len(counters))
	}
	for id, before := range counters {
		if after := now[id]; after != before {
			t.Fatalf("task %s: (attempts, claims) %v after replay, %v before", id, after, before)
		}
	}
}

// answersEqual compares two FSM answers (nil for skipped or non-command
// entries).
func answersEqual(a, b interface{}) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	pa, ok1 := a.(proto.Message)
	pb, ok2 := b.(proto.Message)
	return ok1 && ok2 && proto.Equal(pa, pb)
}

// Test_StatsMatchRecount runs a random workload and, every few hundred
// entries, checks the catalog counters and every index against a full
// recount of the keyspace.
func Test_StatsMatchRecount(t *testing.T) {
	for _, seed := range []uint64{*seedFlag + 1, *seedFlag + 2} {
		h := newHarness(t)
		generate(t, h.f, seed, metamorphicOps()/4, func(i int) {
			if i%250 == 249 {
				checkKeyspace(t, h.f)
			}
		})
		recount := checkKeyspace(t, h.f)
		var total uint64
		for _, m := range recount {
			total += m.Pending + m.Delayed + m.Running + m.Dead + m.Finished
		}
		if total == 0 {
			t.Fatal("the workload left no tasks to count")
		}
	}
}
