package fsm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// checkReadyOrder compares the ready order with Pebble's pending and
// delayed keys: every queue with such tasks, the same tasks in the same
// order.
func checkReadyOrder(t testing.TB, f *FSM) {
	t.Helper()
	if f.ready == nil {
		return
	}
	if f.ready.off {
		t.Fatal("ready order is off: a task id did not pack")
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
		t.Fatalf("ready order holds %d queues, Pebble has pending or delayed tasks in %d", got, want)
	}
	for _, ref := range fresh.loaded() {
		got, _ := f.ready.dump(ref)
		var want []string
		for p := int(MaxPriority); p >= 0; p-- {
			prefix := storage.PendingPrioPrefix(ref.Queue, ref.Tenant, uint32(p))
			err := storage.Scan(r, prefix, storage.PrefixEnd(prefix), 0, func(k, _ []byte) error {
				seq, id, err := storage.ParsePendingKey(k, len(prefix))
				want = append(want, fmt.Sprintf("p/%d/%d/%s", p, seq, id))
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
			want = append(want, fmt.Sprintf("d/%d/%s", e.At, e.ID))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ready order of %v:\n%v\nPebble's pending and delayed keys:\n%v", ref, got, want)
		}
	}
}

// Test_ReadyOrderKeepsKeyspace: one random log applied to a replica whose
// claims scan Pebble and, in random batch sizes, to one whose claims read
// the ready order: the same answers, the same keyspace hash, and a ready
// order equal to Pebble's pending keys after every batch.
func Test_ReadyOrderKeepsKeyspace(t *testing.T) {
	// One seed: the rule book, checkKeyspace in every other test and the
	// metamorphic tests cover the rest; -fsm.seed picks another.
	for _, seed := range []uint64{*seedFlag + 20} {
		scan := Options{ScanPending: true}
		a := &harness{t: t, dir: t.TempDir(), opts: scan}
		a.f = mustOpen(t, a.dir, scan)
		logs, want := generate(t, a.f, seed, metamorphicOps()/2, nil)
		if a.f.ready != nil {
			t.Fatal("ScanPending left the ready order on")
		}
		hash := mustHash(t, a.f)
		b := newHarness(t)
		rng := rand.New(rand.NewPCG(seed, 7))
		var got []interface{}
		for done := 0; done < len(logs); {
			n := min(len(logs)-done, 1+rng.IntN(64))
			got = append(got, b.f.ApplyBatch(logs[done:done+n])...)
			done += n
			checkReadyOrder(t, b.f)
			if rng.IntN(8) == 0 {
				b.reopen() // the order is rebuilt from Pebble
			}
		}
		for j := range logs {
			if !answersEqual(want[j], got[j]) {
				t.Fatalf("entry %d: answers differ\nscan:  %v\nready: %v", logs[j].Index, want[j], got[j])
			}
		}
		if h := mustHash(t, b.f); h != hash {
			t.Fatalf("hash %s with the ready order, %s without", h, hash)
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
