package fsm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// checkReadyOrder compares the ready order with one rebuilt from the task
// records, and with the keyspace's indexes: below LevelPendingInMemory
// the stored pending keys hold the same tasks in the same order; from it
// on no pending key is stored at all. The delayed keys always match.
func checkReadyOrder(t testing.TB, f *FSM) {
	t.Helper()
	if f.ready == nil {
		return
	}
	if f.ready.stale {
		t.Fatal("ready order is stale after a committed batch")
	}
	r, release, err := f.reader()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	fresh := newReadyOrder()
	if err := fresh.rebuild(r); err != nil {
		t.Fatal(err)
	}
	if got, want := len(f.ready.loaded()), len(fresh.loaded()); got != want {
		t.Fatalf("ready order holds %d queues, the records have pending or delayed tasks in %d", got, want)
	}
	stored := f.EnabledLevel() < LevelPendingInMemory
	storedDelayed := f.EnabledLevel() < LevelDelayedInMemory
	var pendingKeys []string
	err = storage.Scan(r, []byte("q/"), storage.PrefixEnd([]byte("q/")), 0, func(k, _ []byte) error {
		// q/<queue>/<tenant>/p/…: queue and tenant names hold no slash.
		if parts := strings.SplitN(string(k), "/", 5); len(parts) == 5 && parts[3] == "p" {
			pendingKeys = append(pendingKeys, string(k))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !stored && len(pendingKeys) > 0 {
		t.Fatalf("level %d stores no pending index, yet %d pending keys are left, the first %q", f.EnabledLevel(), len(pendingKeys), pendingKeys[0])
	}
	for _, ref := range fresh.loaded() {
		got, _ := f.ready.dump(ref)
		want, _ := fresh.dump(ref)
		if !slices.Equal(got, want) {
			t.Fatalf("ready order of %v:\n%v\nrebuilt from the records:\n%v", ref, got, want)
		}
		var keys []string
		for p := int(MaxPriority); p >= 0 && stored; p-- {
			prefix := storage.PendingPrioPrefix(ref.Queue, ref.Tenant, uint32(p))
			err := storage.Scan(r, prefix, storage.PrefixEnd(prefix), 0, func(k, _ []byte) error {
				seq, id, err := storage.ParsePendingKey(k, len(prefix))
				keys = append(keys, fmt.Sprintf("p/%d/%d/%s", p, seq, id))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		delayed, err := storage.DueDelayedInQueue(r, ref.Queue, ref.Tenant, math.MaxInt64, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range delayed {
			keys = append(keys, fmt.Sprintf("d/%d/%s", e.At, e.ID))
		}
		// The lines of the order whose keys the level still stores.
		kept := slices.DeleteFunc(slices.Clone(got), func(l string) bool {
			return (!stored && strings.HasPrefix(l, "p/")) || (!storedDelayed && strings.HasPrefix(l, "d/"))
		})
		if !slices.Equal(kept, keys) {
			t.Fatalf("ready order of %v at level %d:\n%v\nPebble's pending and delayed keys:\n%v", ref, f.EnabledLevel(), kept, keys)
		}
	}
	checkWakes(t, f, r, fresh, storedDelayed)
	checkExpiry(t, f, r, fresh)
	if stored && len(pendingKeys) != countPending(fresh) {
		t.Fatalf("%d pending keys stored, %d pending tasks in the records", len(pendingKeys), countPending(fresh))
	}
	checkRunningOrder(t, f, r, fresh)
}

// checkExpiry compares the expiry order with the one rebuilt from the
// records (fresh), and with the keyspace: below LevelExpiryInMemory the
// stored e/ keys name the same tasks at the same times; from it on no e/
// key is stored.
func checkExpiry(t testing.TB, f *FSM, r storage.Reader, fresh *readyOrder) {
	t.Helper()
	got := f.ready.dumpExpiry()
	if want := fresh.dumpExpiry(); !slices.Equal(got, want) {
		t.Fatalf("expiry order:\n%v\nrebuilt from the records:\n%v", got, want)
	}
	stored, err := storage.Expired(r, math.MaxInt64, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range stored {
		keys = append(keys, fmt.Sprintf("e/%d/%s", e.At, e.ID))
	}
	if f.EnabledLevel() >= LevelExpiryInMemory {
		if len(keys) > 0 {
			t.Fatalf("level %d stores no expiry index, yet %d e/ keys are left, the first %q", f.EnabledLevel(), len(keys), keys[0])
		}
		return
	}
	if !slices.Equal(got, keys) {
		t.Fatalf("expiry order:\n%v\nPebble's e/ keys:\n%v", got, keys)
	}
}

// checkWakes compares the wakes (every queue's delayed tasks by time) with
// those rebuilt from the records (fresh), and with the keyspace: below
// LevelDelayedInMemory the stored w/ keys name the same tasks at the same
// times; from it on no w/ or q/…/d/ key is stored.
func checkWakes(t testing.TB, f *FSM, r storage.Reader, fresh *readyOrder, stored bool) {
	t.Helper()
	got := f.ready.dumpWakes()
	if want := fresh.dumpWakes(); !slices.Equal(got, want) {
		t.Fatalf("wakes:\n%v\nrebuilt from the records:\n%v", got, want)
	}
	wakes, err := storage.DueDelayed(r, math.MaxInt64, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range wakes {
		keys = append(keys, fmt.Sprintf("w/%d/%s", e.At, e.ID))
	}
	if stored {
		if !slices.Equal(got, keys) {
			t.Fatalf("wakes:\n%v\nPebble's w/ keys:\n%v", got, keys)
		}
		return
	}
	err = storage.Scan(r, []byte("q/"), storage.PrefixEnd([]byte("q/")), 0, func(k, _ []byte) error {
		if parts := strings.SplitN(string(k), "/", 5); len(parts) == 5 && parts[3] == "d" {
			keys = append(keys, string(k))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		t.Fatalf("level %d stores no delayed index, yet %d keys are left, the first %q", f.EnabledLevel(), len(keys), keys[0])
	}
}

// checkRunningOrder compares the running orders with those rebuilt from
// the records (fresh), and with the keyspace: below LevelRunningInMemory
// the stored running, lease and deadline keys name the same tasks at the
// same times; from it on none is stored.
func checkRunningOrder(t testing.TB, f *FSM, r storage.Reader, fresh *readyOrder) {
	t.Helper()
	got, want := f.ready.dumpRunning(), fresh.dumpRunning()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("running order:\n%v\nrebuilt from the records:\n%v", got, want)
	}
	var keys []string
	err := storage.Scan(r, []byte("q/"), storage.PrefixEnd([]byte("q/")), 0, func(k, _ []byte) error {
		if parts := strings.SplitN(string(k), "/", 5); len(parts) == 5 && parts[3] == "r" {
			keys = append(keys, fmt.Sprintf("r/%s/%s/%s", parts[1], parts[2], parts[4]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := storage.ExpiredLeases(r, math.MaxInt64, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range leases {
		keys = append(keys, fmt.Sprintf("l/%d/%s", e.At, e.ID))
	}
	deadlines, err := storage.PastDeadline(r, math.MaxInt64, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range deadlines {
		keys = append(keys, fmt.Sprintf("o/%d/%s", e.At, e.ID))
	}
	slices.Sort(keys)
	if f.EnabledLevel() >= LevelRunningInMemory {
		if len(keys) > 0 {
			t.Fatalf("level %d stores no running index, yet %d keys are left, the first %q", f.EnabledLevel(), len(keys), keys[0])
		}
		return
	}
	if !slices.Equal(got, keys) {
		t.Fatalf("running order:\n%v\nPebble's running, lease and deadline keys:\n%v", got, keys)
	}
}

// countPending is how many pending tasks o holds.
func countPending(o *readyOrder) int {
	n := 0
	for _, q := range o.queues {
		for _, tr := range q.pending {
			if tr != nil {
				n += tr.Len()
			}
		}
	}
	return n
}

// Test_ReadyOrderKeepsKeyspace: one random log, whose latch crosses
// LevelPendingInMemory and LevelRunningInMemory at random points, applied entry by entry to one
// replica and in random batch sizes with reopens to another: the same
// answers, the same keyspace hash, and a ready order equal to the records
// (and, below the level, to the stored pending keys) after every batch.
func Test_ReadyOrderKeepsKeyspace(t *testing.T) {
	// One seed: the rule book, checkKeyspace in every other test and the
	// metamorphic tests cover the rest; -fsm.seed picks another.
	for _, seed := range []uint64{*seedFlag + 20} {
		a := newHarness(t)
		logs, want := generate(t, a.f, seed, metamorphicOps()/2, nil)
		hash := mustHash(t, a.f)
		b := newHarness(t)
		rng := rand.New(rand.NewPCG(seed, 7))
		var got []interface{}
		below, above := map[uint32]int{}, map[uint32]int{}
		levels := []uint32{LevelPendingInMemory, LevelRunningInMemory, LevelDelayedInMemory}
		for done := 0; done < len(logs); {
			n := min(len(logs)-done, 1+rng.IntN(64))
			got = append(got, b.f.ApplyBatch(logs[done:done+n])...)
			done += n
			checkReadyOrder(t, b.f)
			for _, l := range levels {
				if b.f.EnabledLevel() < l {
					below[l]++
				} else {
					above[l]++
				}
			}
			if rng.IntN(8) == 0 {
				b.reopen() // the order is rebuilt from the records
			}
		}
		for _, l := range levels {
			if below[l] == 0 || above[l] == 0 {
				t.Fatalf("the log's latch never crossed level %d: %d batches below, %d at or above", l, below[l], above[l])
			}
		}
		for j := range logs {
			if !answersEqual(want[j], got[j]) {
				t.Fatalf("entry %d: answers differ\none by one: %v\nbatched:    %v", logs[j].Index, want[j], got[j])
			}
		}
		if h := mustHash(t, b.f); h != hash {
			t.Fatalf("hash %s batched with reopens, %s one by one", h, hash)
		}
	}
}

// Test_ReadyOrderDiscardedOnApplyPanic: a batch whose claim took the head
// and then panicked never committed; the ready order must not have lost
// that head, or the next claim would skip a pending task.
func Test_ReadyOrderDiscardedOnApplyPanic(t *testing.T) {
	h := newHarness(t)
	ids := h.enqueue(t0, nt("q", "acme", 0), nt("q", "acme", 0), nt("q", "acme", 0))
	h.claimOne(at(time.Second), "q", "acme") // takes ids[0]
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("an undecodable entry did not stop apply")
			}
		}()
		h.f.ApplyBatch([]*raft.Log{
			entry(t, h.index+1, claimCmd(at(time.Second), "q", "acme", "w1", lease, 1)),
			{Index: h.index + 2, Type: raft.LogCommand, Data: []byte{0xff, 0xff}},
		})
	}()
	if !h.f.ready.stale {
		t.Fatal("a batch that never committed left the ready order as it wrote it")
	}
	if got := h.claimOne(at(2*time.Second), "q", "acme"); got.GetId() != ids[1] {
		t.Fatalf("after the failed batch the claim took %s, want the head %s", got.GetId(), ids[1])
	}
	checkReadyOrder(t, h.f)
}

// Test_PackIDKeepsOrder: packed ids round-trip and sort as the ids' text
// does, which is the order of the index keys; an id TaskID did not make
// does not pack.
func Test_PackIDKeepsOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	prev, prevID := uint64(0), ""
	ids := []string{}
	for range 2000 {
		idx := rng.Uint64N(1 << 48)
		if rng.IntN(4) == 0 {
			idx = rng.Uint64N(1 << 12) // small indexes, as a young cluster's
		}
		ids = append(ids, TaskID(idx, rng.IntN(pb.MaxBatch)))
	}
	slices.Sort(ids)
	for i, id := range ids {
		u, ok := packID(id)
		if !ok {
			t.Fatalf("%s does not pack", id)
		}
		if got := (orderItem{id: u}).taskID(); got != id {
			t.Fatalf("%s packs and unpacks to %s", id, got)
		}
		if i > 0 && (u < prev) != (id < prevID) {
			t.Fatalf("%s and %s sort apart once packed", prevID, id)
		}
		prev, prevID = u, id
	}
	for _, bad := range []string{"", "abc", "0000000000000000000G", "00000000000000000000x",
		"00010000000000000000", // an index of 2^48 or more
		"0000000000000001000A"} {
		if _, ok := packID(bad); ok {
			t.Errorf("%q packed", bad)
		}
	}
}
