package fsm

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// checkIdemFilter asserts the filter's invariant against a full scan of
// the i/ range: it counts exactly the live keys, and when on it holds
// exactly their fingerprints, so no live key can be answered "absent".
// checkKeyspace calls it, so every workload test checks it too.
func checkIdemFilter(t testing.TB, f *FSM) {
	t.Helper()
	f.mu.RLock()
	idem := f.idem
	f.mu.RUnlock()
	if idem == nil {
		return
	}
	r, release, err := f.reader()
	if err != nil {
		t.Fatal(err)
	}
	var want []uint32
	prefix := storage.IdemPrefix()
	err = storage.Scan(r, prefix, storage.PrefixEnd(prefix), 0, func(k, _ []byte) error {
		want = append(want, idemFingerprint(k))
		return nil
	})
	release()
	if err != nil {
		t.Fatal(err)
	}
	if idem.stats.anomalies != 0 {
		t.Fatalf("idempotency filter: %d removes of an uncounted key", idem.stats.anomalies)
	}
	if len(idem.added)+len(idem.removed) != 0 {
		t.Fatalf("idempotency filter: %d adds and %d removes left after the last commit", len(idem.added), len(idem.removed))
	}
	if idem.live != len(want) {
		t.Fatalf("idempotency filter counts %d live keys, Pebble holds %d", idem.live, len(want))
	}
	if idem.slots == nil {
		if !idem.rebuild {
			t.Fatal("idempotency filter off without a rebuild pending")
		}
		return
	}
	for _, fp := range want {
		if !idem.contains(fp) {
			t.Fatalf("idempotency filter would answer absent for a live key (fingerprint %#x)", fp)
		}
	}
	if got := tableFingerprints(t, idem); !slices.Equal(got, sorted(want)) {
		t.Fatalf("idempotency filter holds %d fingerprints, Pebble's %d keys make %d", len(got), len(want), len(want))
	}
}

// tableFingerprints lists the table's entries, sorted, after checking that
// each one is reachable from its home slot.
func tableFingerprints(t testing.TB, idem *idemFilter) []uint32 {
	t.Helper()
	var out []uint32
	n := len(idem.slots)
	for i, fp := range idem.slots {
		if fp == 0 {
			continue
		}
		out = append(out, fp)
		for j := home(fp, n); j != i; j = (j + 1) % n {
			if idem.slots[j] == 0 {
				t.Fatalf("fingerprint %#x at slot %d is cut off from its home %d by an empty slot %d", fp, i, home(fp, n), j)
			}
		}
	}
	if len(out) != idem.used {
		t.Fatalf("table holds %d fingerprints, used says %d", len(out), idem.used)
	}
	return sorted(out)
}

func sorted(s []uint32) []uint32 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// Test_IdemTableIsAMultiset drives the table with few distinct
// fingerprints, many copies and homes clustered at its end, so that runs
// wrap around and deletes shift entries across the wrap, and compares it
// with a map after every step.
func Test_IdemTableIsAMultiset(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	f := newIdemFilter(idemMinSlots*idemSlotBytes, slog.New(slog.DiscardHandler))
	f.slots = make([]uint32, idemMinSlots)
	ref := map[uint32]int{}
	var held []uint32
	for step := range 20000 {
		// Half the fingerprints have homes in the last few slots.
		fp := uint32(1 + rng.IntN(40))
		if rng.IntN(2) == 0 {
			fp = ^uint32(0) - uint32(rng.IntN(40))
		}
		if rng.IntN(3) > 0 && len(held) > 0 {
			i := rng.IntN(len(held))
			fp = held[i]
			held[i] = held[len(held)-1]
			held = held[:len(held)-1]
			if !f.delete(fp) {
				t.Fatalf("step %d: delete of held %#x failed", step, fp)
			}
			ref[fp]--
		} else if fits(f.used+1, len(f.slots)) {
			f.insert(fp)
			ref[fp]++
			held = append(held, fp)
		}
		for fp, n := range ref {
			if f.contains(fp) != (n > 0) {
				t.Fatalf("step %d: contains(%#x) = %v with %d copies", step, fp, !(n > 0), n)
			}
		}
		if step%97 == 0 {
			if got := tableFingerprints(t, f); !slices.Equal(got, sorted(held)) {
				t.Fatalf("step %d: table %v, want %v", step, got, sorted(held))
			}
		}
	}
	if f.delete(12345) {
		t.Fatal("deleted a fingerprint that was never inserted")
	}
}

// newIdemHarness is a harness whose FSM has the given filter bound.
func newIdemHarness(t testing.TB, filterBytes int) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), opts: Options{IdemFilterBytes: filterBytes}}
	h.f = mustOpen(t, h.dir, h.opts)
	return h
}

func keyed(q, key string) *pb.NewTask {
	task := nt(q, "t", 0)
	task.IdempotencyKey = key
	task.RetentionNs = int64(time.Second)
	return task
}

// enqueueKeys enqueues one task per key in entries of up to pb.MaxBatch and
// returns each item's code and id.
func (h *harness) enqueueKeys(now int64, keys []string) ([]pb.Code, []string) {
	h.t.Helper()
	var codes []pb.Code
	var ids []string
	for len(keys) > 0 {
		n := min(len(keys), pb.MaxBatch)
		tasks := make([]*pb.NewTask, n)
		for i, k := range keys[:n] {
			tasks[i] = keyed("q", k)
		}
		for _, it := range h.do(enqueueCmd(now, tasks...)).GetItems() {
			codes = append(codes, it.GetCode())
			ids = append(ids, it.GetTaskId())
		}
		keys = keys[n:]
	}
	return codes, ids
}

// finishAndPurge cancels the tasks and purges them once their retention
// ended, which deletes their idempotency keys.
func (h *harness) finishAndPurge(now int64, ids []string) int64 {
	h.t.Helper()
	for _, id := range ids {
		h.one(cancelCmd(now, id), pb.Code_CODE_OK)
	}
	now += int64(2 * time.Second)
	for range (len(ids) + pb.MaxBatch - 1) / pb.MaxBatch {
		h.do(purgeCmd(now, pb.MaxBatch))
	}
	return now
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func wantCodes(t testing.TB, got []pb.Code, want pb.Code) {
	t.Helper()
	for i, c := range got {
		if c != want {
			t.Fatalf("item %d: %v, want %v", i, c, want)
		}
	}
}

func Test_IdemSameKeyTwiceInOneCommand(t *testing.T) {
	h := newHarness(t)
	res := h.do(enqueueCmd(at(0), keyed("q", "k"), keyed("q", "k")))
	a, b := res.GetItems()[0], res.GetItems()[1]
	if a.GetCode() != pb.Code_CODE_OK || b.GetCode() != pb.Code_CODE_DUPLICATE || b.GetTaskId() != a.GetTaskId() {
		t.Fatalf("items %v and %v; want OK, then DUPLICATE of the first", a, b)
	}
	checkKeyspace(t, h.f)
}

func Test_IdemSameKeyInOneApplyBatch(t *testing.T) {
	h := newHarness(t)
	logs := []*raft.Log{
		entry(t, 1, enqueueCmd(at(0), keyed("q", "k"))),
		entry(t, 2, enqueueCmd(at(0), keyed("q", "k"))),
	}
	out := h.f.ApplyBatch(logs)
	h.index = 2
	a, b := out[0].(*pb.CommandResult).GetItems()[0], out[1].(*pb.CommandResult).GetItems()[0]
	if a.GetCode() != pb.Code_CODE_OK || b.GetCode() != pb.Code_CODE_DUPLICATE || b.GetTaskId() != a.GetTaskId() {
		t.Fatalf("items %v and %v; want OK, then DUPLICATE of the first", a, b)
	}
	checkKeyspace(t, h.f)
}

// Test_IdemPurgeThenEnqueueInOneApplyBatch: the purge's delete reaches the
// filter only at the commit, after an enqueue of the same key in the same
// batch counted it again.
func Test_IdemPurgeThenEnqueueInOneApplyBatch(t *testing.T) {
	h := newHarness(t)
	ids := h.enqueue(at(0), keyed("q", "k"))
	h.one(cancelCmd(at(0), ids[0]), pb.Code_CODE_OK)
	now := at(2 * time.Second)
	out := h.f.ApplyBatch([]*raft.Log{
		entry(t, h.index+1, purgeCmd(now, 10)),
		entry(t, h.index+2, enqueueCmd(now, keyed("q", "k"))),
		entry(t, h.index+3, enqueueCmd(now, keyed("q", "k"))),
	})
	h.index += 3
	if got := len(out[0].(*pb.CommandResult).GetItems()); got != 1 {
		t.Fatalf("purge removed %d tasks, want 1", got)
	}
	first, again := out[1].(*pb.CommandResult).GetItems()[0], out[2].(*pb.CommandResult).GetItems()[0]
	if first.GetCode() != pb.Code_CODE_OK || again.GetCode() != pb.Code_CODE_DUPLICATE || again.GetTaskId() != first.GetTaskId() {
		t.Fatalf("after purge: %v then %v; want OK then its DUPLICATE", first, again)
	}
	checkKeyspace(t, h.f)
	h.reopen()
	checkKeyspace(t, h.f)
	h.one(enqueueCmd(now, keyed("q", "k")), pb.Code_CODE_DUPLICATE)
}

// Test_IdemFilterForgetsAbandonedBatch: a batch that panics commits
// nothing, so the filter must not keep its sets (exactness) nor apply its
// deletes (a live key answered absent would duplicate a task).
func Test_IdemFilterForgetsAbandonedBatch(t *testing.T) {
	h := newHarness(t)
	ids := h.enqueue(at(0), keyed("q", "old"))
	h.one(cancelCmd(at(0), ids[0]), pb.Code_CODE_OK)
	now := at(2 * time.Second)
	bad := &raft.Log{Index: h.index + 3, Type: raft.LogCommand, Data: []byte{0xff}}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("ApplyBatch went on past an undecodable entry")
			}
		}()
		h.f.ApplyBatch([]*raft.Log{
			entry(t, h.index+1, purgeCmd(now, 10)),
			entry(t, h.index+2, enqueueCmd(now, keyed("q", "new"))),
			bad,
		})
	}()
	// The next batch takes the adds back.
	h.one(enqueueCmd(now, keyed("q", "other")), pb.Code_CODE_OK)
	checkKeyspace(t, h.f)
	h.one(enqueueCmd(now, keyed("q", "old")), pb.Code_CODE_DUPLICATE)
	h.one(enqueueCmd(now, keyed("q", "new")), pb.Code_CODE_OK)
	checkKeyspace(t, h.f)
}

// Test_IdemKeyWhoseTaskIsGone: a key left behind by a task that no longer
// exists (no command makes one today; an older version or a bug could) is
// taken over by the next enqueue, which must not count it twice.
func Test_IdemKeyWhoseTaskIsGone(t *testing.T) {
	h := newHarness(t)
	if err := h.f.db.Set(storage.IdemKey("q", "t", "k"), []byte(TaskID(999, 0)), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	h.reopen() // the filter counts the stray key at Open
	checkIdemFilter(t, h.f)
	it := h.one(enqueueCmd(at(0), keyed("q", "k")), pb.Code_CODE_OK)
	checkKeyspace(t, h.f)
	h.one(enqueueCmd(at(0), keyed("q", "k")), pb.Code_CODE_DUPLICATE)
	now := h.finishAndPurge(at(0), []string{it.GetTaskId()})
	checkKeyspace(t, h.f)
	if n := h.f.idem.live; n != 0 {
		t.Fatalf("filter counts %d live keys after the purge, want 0", n)
	}
	h.one(enqueueCmd(now, keyed("q", "k")), pb.Code_CODE_OK)
	checkKeyspace(t, h.f)
}

// Test_IdemFilterAcrossLifecycle: keys stay known across growth, reopen,
// purge and shrink, and the filter answers almost every new key itself.
func Test_IdemFilterAcrossLifecycle(t *testing.T) {
	h := newHarness(t)
	const n = 5000 // several doublings of the smallest table
	codes, ids := h.enqueueKeys(at(0), keys("a", n))
	wantCodes(t, codes, pb.Code_CODE_OK)
	if got := len(h.f.idem.slots); got < 2*idemMinSlots {
		t.Fatalf("table has %d slots after %d keys: it never grew", got, n)
	}
	checkKeyspace(t, h.f)
	codes, _ = h.enqueueKeys(at(0), keys("a", n))
	wantCodes(t, codes, pb.Code_CODE_DUPLICATE)

	h.reopen()
	checkKeyspace(t, h.f)
	before := h.f.idem.stats
	codes, _ = h.enqueueKeys(at(0), keys("b", n))
	wantCodes(t, codes, pb.Code_CODE_OK)
	if skipped := h.f.idem.stats.skipped - before.skipped; skipped < n*99/100 {
		t.Fatalf("filter answered %d of %d new keys itself", skipped, n)
	}
	codes, _ = h.enqueueKeys(at(0), keys("a", n))
	wantCodes(t, codes, pb.Code_CODE_DUPLICATE)

	slots := len(h.f.idem.slots)
	now := h.finishAndPurge(at(0), ids)
	checkKeyspace(t, h.f)
	codes, _ = h.enqueueKeys(now, keys("b", n))
	wantCodes(t, codes, pb.Code_CODE_DUPLICATE)
	codes, ids = h.enqueueKeys(now, keys("a", n))
	wantCodes(t, codes, pb.Code_CODE_OK)
	now = h.finishAndPurge(now, ids)
	_, bids := h.enqueueKeys(now, keys("b", n)) // duplicates: the tasks of b
	now = h.finishAndPurge(now, bids)
	checkKeyspace(t, h.f)
	if h.f.idem.live != 0 || len(h.f.idem.slots) >= slots {
		t.Fatalf("after purging every key: %d live, %d slots (was %d): want 0 and a smaller table",
			h.f.idem.live, len(h.f.idem.slots), slots)
	}
	codes, _ = h.enqueueKeys(now, keys("a", 10))
	wantCodes(t, codes, pb.Code_CODE_OK)
	checkKeyspace(t, h.f)
}

// Test_IdemFilterOverflow: past its memory bound the filter switches off
// (every lookup asks Pebble, answers unchanged) and comes back, rebuilt
// from Pebble, once the keys fit again.
func Test_IdemFilterOverflow(t *testing.T) {
	h := newIdemHarness(t, idemMinSlots*idemSlotBytes) // 768 keys at most
	capKeys := idemMinSlots * idemMaxLoadNum / idemMaxLoadDen
	codes, ids := h.enqueueKeys(at(0), keys("a", capKeys+100))
	wantCodes(t, codes, pb.Code_CODE_OK)
	if h.f.idem.slots != nil {
		t.Fatalf("filter still on with %d keys, bound %d", h.f.idem.live, capKeys)
	}
	checkKeyspace(t, h.f)
	codes, _ = h.enqueueKeys(at(0), keys("a", capKeys+100))
	wantCodes(t, codes, pb.Code_CODE_DUPLICATE)

	h.reopen() // too many to build: it stays off, counting
	checkKeyspace(t, h.f)
	if h.f.idem.slots != nil {
		t.Fatal("filter built over its bound at Open")
	}

	// Purge until the rest fits in half the table: it is rebuilt.
	now := h.finishAndPurge(at(0), ids[:capKeys])
	checkKeyspace(t, h.f)
	if h.f.idem.slots == nil || h.f.idem.live != 100 {
		t.Fatalf("filter with %d live keys: on %v, want on with 100", h.f.idem.live, h.f.idem.slots != nil)
	}
	codes, _ = h.enqueueKeys(now, keys("a", capKeys+100)[capKeys:])
	wantCodes(t, codes, pb.Code_CODE_DUPLICATE)
	codes, _ = h.enqueueKeys(now, keys("a", capKeys))
	wantCodes(t, codes, pb.Code_CODE_OK)
	checkKeyspace(t, h.f)
}

// Test_IdemFilterAfterRestore: a restore replaces the keyspace, and the
// filter with it: the snapshot's keys are known, the replaced ones not.
func Test_IdemFilterAfterRestore(t *testing.T) {
	a, b := newHarness(t), newHarness(t)
	_, _ = a.enqueueKeys(at(0), keys("a", 3000))
	_, _ = b.enqueueKeys(at(0), keys("b", 3000))
	snap := mustSnapshot(t, a.f)
	if err := restoreFrom(b.f, snap); err != nil {
		t.Fatal(err)
	}
	b.index = a.index
	checkKeyspace(t, b.f)
	codes, _ := b.enqueueKeys(at(0), keys("a", 3000))
	wantCodes(t, codes, pb.Code_CODE_DUPLICATE)
	codes, _ = b.enqueueKeys(at(0), keys("b", 3000))
	wantCodes(t, codes, pb.Code_CODE_OK)
	checkKeyspace(t, b.f)
}

// Test_IdemFilterChangesNothing feeds one random log to FSMs with the
// filter on, off, and at its smallest bound in random apply batches, with
// a reopen and a restore on the way: the same answers and keyspace hash.
func Test_IdemFilterChangesNothing(t *testing.T) {
	seed := *seedFlag + 10
	n := metamorphicOps()
	ref := newHarness(t)
	logs, want := generate(t, ref.f, seed, n, func(i int) {
		if i%1000 == 999 {
			checkKeyspace(t, ref.f)
		}
	})
	wantHash := mustHash(t, ref.f)
	for _, c := range []struct {
		name  string
		bytes int
	}{{"off", -1}, {"smallest", idemMinSlots * idemSlotBytes}, {"default", 0}} {
		t.Run(c.name, func(t *testing.T) {
			h := newIdemHarness(t, c.bytes)
			rng := rand.New(rand.NewPCG(seed, 11))
			var got []interface{}
			got = append(got, applyInBatches(h.f, logs[:n/3], rng, 64)...)
			h.reopen()
			checkKeyspace(t, h.f)
			snap := mustSnapshot(t, h.f)
			got = append(got, applyInBatches(h.f, logs[n/3:2*n/3], rng, 64)...)
			if err := restoreFrom(h.f, snap); err != nil {
				t.Fatal(err)
			}
			checkKeyspace(t, h.f)
			got = got[:n/3]
			got = append(got, applyInBatches(h.f, logs[n/3:], rng, 64)...)
			for i := range logs {
				if !answersEqual(want[i], got[i]) {
					t.Fatalf("entry %d: answers differ\nref: %v\ngot: %v", logs[i].Index, want[i], got[i])
				}
			}
			checkKeyspace(t, h.f)
			if hash := mustHash(t, h.f); hash != wantHash {
				t.Fatalf("hash %s, reference %s", hash, wantHash)
			}
		})
	}
}
