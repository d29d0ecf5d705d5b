package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// checkIdemIndex asserts the index's invariant against the records: it
// holds exactly the idempotency keys of the live tasks, each for its task
// (the newest, should two share one), and answers each exactly.
// checkKeyspace calls it, so every workload test checks it too.
func checkIdemIndex(t testing.TB, f *FSM) {
	t.Helper()
	if f.ready == nil {
		return
	}
	r, release, err := f.reader()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	want := map[string]uint64{} // i/ key → packed id
	err = storage.Scan(r, storage.TaskPrefix(), storage.PrefixEnd(storage.TaskPrefix()), 0, func(k, _ []byte) error {
		task, _, err := storage.GetTaskRecord(r, string(k[len(storage.TaskPrefix()):]))
		if err != nil {
			return err
		}
		if ik := taskIdemKey(task); ik != nil {
			id, ok := packID(task.GetId())
			if !ok {
				return fmt.Errorf("task id %q does not pack", task.GetId())
			}
			want[string(ik)] = max(want[string(ik)], id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	x := f.ready.idem
	if x.len() != len(want) {
		t.Fatalf("idempotency index holds %d keys, the records %d", x.len(), len(want))
	}
	owns := recordOwner(r)
	for ik, id := range want {
		got, ok, err := x.lookup([]byte(ik), owns)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || got != id {
			t.Fatalf("idempotency index: key %q gives %s (found %v), the records %s", ik, unpackID(got), ok, unpackID(id))
		}
	}
	for ik, id := range x.clash {
		if want[ik] != id {
			t.Fatalf("idempotency index: clashing key %q gives %s, the records %s", ik, unpackID(id), unpackID(want[ik]))
		}
	}
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

// Test_IdemPurgeThenEnqueueInOneApplyBatch: a purge gives the key back at
// once, so an enqueue later in the same batch takes it, and the next one is
// its duplicate.
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

// Test_IdemIndexForgetsAbandonedBatch: a batch that panics commits
// nothing, so the index must not keep its sets (a key taken by a task that
// does not exist) nor its removes (a live key answered absent would
// duplicate a task).
func Test_IdemIndexForgetsAbandonedBatch(t *testing.T) {
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
	// The next batch rebuilds the index from the committed records.
	h.one(enqueueCmd(now, keyed("q", "other")), pb.Code_CODE_OK)
	checkKeyspace(t, h.f)
	h.one(enqueueCmd(now, keyed("q", "old")), pb.Code_CODE_DUPLICATE)
	h.one(enqueueCmd(now, keyed("q", "new")), pb.Code_CODE_OK)
	checkKeyspace(t, h.f)
}

// Test_IdemKeyWhoseTaskIsGone: an i/ key left behind by a task that no
// longer exists (no command makes one today; an older version or a bug
// could) is not an index entry: the next enqueue of its key is new, and
// below LevelIdemInMemory it takes the stored key over, as it always did.
func Test_IdemKeyWhoseTaskIsGone(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(LevelIdemInMemory - 1))
	if err := h.f.db.Set(storage.IdemKey("q", "t", "k"), []byte(TaskID(999, 0)), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	h.reopen()
	checkIdemIndex(t, h.f)
	it := h.one(enqueueCmd(at(0), keyed("q", "k")), pb.Code_CODE_OK)
	checkKeyspace(t, h.f) // the stored key now names the new task
	h.one(enqueueCmd(at(0), keyed("q", "k")), pb.Code_CODE_DUPLICATE)
	now := h.finishAndPurge(at(0), []string{it.GetTaskId()})
	checkKeyspace(t, h.f)
	if n := h.f.ready.idem.len(); n != 0 {
		t.Fatalf("index holds %d keys after the purge, want 0", n)
	}
	h.one(enqueueCmd(now, keyed("q", "k")), pb.Code_CODE_OK)
	checkKeyspace(t, h.f)
}

// Test_IdemIndexAcrossLifecycle: keys stay known across reopen and purge,
// and a purged key is free again.
func Test_IdemIndexAcrossLifecycle(t *testing.T) {
	h := newHarness(t)
	const n = 3000
	codes, ids := h.enqueueKeys(at(0), keys("a", n))
	wantCodes(t, codes, pb.Code_CODE_OK)
	checkKeyspace(t, h.f)
	codes, _ = h.enqueueKeys(at(0), keys("a", n))
	wantCodes(t, codes, pb.Code_CODE_DUPLICATE)

	h.reopen()
	checkKeyspace(t, h.f)
	codes, _ = h.enqueueKeys(at(0), keys("b", n))
	wantCodes(t, codes, pb.Code_CODE_OK)
	codes, _ = h.enqueueKeys(at(0), keys("a", n))
	wantCodes(t, codes, pb.Code_CODE_DUPLICATE)

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
	if got := h.f.ready.idem.len(); got != 0 {
		t.Fatalf("after purging every key the index holds %d", got)
	}
	codes, _ = h.enqueueKeys(now, keys("a", 10))
	wantCodes(t, codes, pb.Code_CODE_OK)
	checkKeyspace(t, h.f)
}

// Test_IdemKeysAcrossTheLatch: below LevelIdemInMemory each key is stored
// under i/ as well; the latch deletes them all in its own entry, no later
// enqueue stores one, and the keys taken before the latch stay taken,
// through a reopen, until their tasks are purged.
func Test_IdemKeysAcrossTheLatch(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(LevelIdemInMemory - 1))
	_, ids := h.enqueueKeys(at(0), keys("a", 100))
	if got := countKeys(t, h.f, storage.IdemPrefix()); got != 100 {
		t.Fatalf("below the latch %d i/ keys, want 100", got)
	}
	checkKeyspace(t, h.f)
	h.do(latchCmd(LevelIdemInMemory))
	if got := countKeys(t, h.f, storage.IdemPrefix()); got != 0 {
		t.Fatalf("after the latch %d i/ keys, want none", got)
	}
	codes, _ := h.enqueueKeys(at(0), keys("a", 100))
	wantCodes(t, codes, pb.Code_CODE_DUPLICATE)
	codes, bids := h.enqueueKeys(at(0), keys("b", 100))
	wantCodes(t, codes, pb.Code_CODE_OK)
	if got := countKeys(t, h.f, storage.IdemPrefix()); got != 0 {
		t.Fatalf("enqueues after the latch stored %d i/ keys", got)
	}
	checkKeyspace(t, h.f)
	h.reopen()
	codes, _ = h.enqueueKeys(at(0), append(keys("a", 100), keys("b", 100)...))
	wantCodes(t, codes, pb.Code_CODE_DUPLICATE)
	now := h.finishAndPurge(at(0), append(ids, bids...))
	checkKeyspace(t, h.f)
	codes, _ = h.enqueueKeys(now, keys("a", 100))
	wantCodes(t, codes, pb.Code_CODE_OK)
}

// countKeys is how many keys of f's keyspace start with prefix.
func countKeys(t testing.TB, f *FSM, prefix []byte) int {
	t.Helper()
	r, release, err := f.reader()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	n := 0
	err = storage.Scan(r, prefix, storage.PrefixEnd(prefix), 0, func(_, _ []byte) error {
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Test_IdemIndexAfterRestore: a restore replaces the keyspace, and the
// index with it: the snapshot's keys are known, the replaced ones not.
func Test_IdemIndexAfterRestore(t *testing.T) {
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

// Test_IdemClashesChangeNothing feeds one random log to an FSM whose index
// hashes every key into one of a few values, in random apply batches, with
// a reopen and a restore on the way: the same answers and keyspace hash as
// with the real hash, whose clashes are too rare to test otherwise.
func Test_IdemClashesChangeNothing(t *testing.T) {
	seed := *seedFlag + 10
	n := metamorphicOps()
	ref := newHarness(t)
	logs, want := generate(t, ref.f, seed, n, func(i int) {
		if i%1000 == 999 {
			checkKeyspace(t, ref.f)
		}
	})
	wantHash := mustHash(t, ref.f)
	real := idemHash
	idemHash = func(b []byte) uint64 { return uint64(len(b) % 3) }
	defer func() { idemHash = real }()
	h := newHarness(t)
	rng := rand.New(rand.NewPCG(seed, 11))
	var got []interface{}
	got = append(got, applyInBatches(h.f, logs[:n/3], rng, 64)...)
	h.reopen()
	checkKeyspace(t, h.f)
	if len(h.f.ready.idem.clash) == 0 {
		t.Fatal("no key clashed: the test tests nothing")
	}
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
}

// Test_IdemIndexAgreesWithAMap: lookups, sets and removes in any order,
// with a hash that makes keys share values, answer as a plain map of the
// keys' bytes does. set skips its probe after a lookup found the key's hash
// free (idemIndex.free); this holds that shortcut to the slow path.
func Test_IdemIndexAgreesWithAMap(t *testing.T) {
	for _, hashes := range []uint64{0, 5} { // 0: xxhash; 5: five values for all keys
		t.Run(fmt.Sprintf("hashes=%d", hashes), func(t *testing.T) {
			if hashes > 0 {
				real := idemHash
				idemHash = func(b []byte) uint64 { return xxhash.Sum64(b) % hashes }
				defer func() { idemHash = real }()
			}
			rng := rand.New(rand.NewPCG(*seedFlag, 12))
			x, model := newIdemIndex(), map[string]uint64{}
			holder := map[uint64]string{} // a task id's key, as its record says
			owns := func(id uint64, ik []byte) (bool, error) { return holder[id] == string(ik), nil }
			next := uint64(1)
			key := func() []byte { return []byte(fmt.Sprintf("i/q/t/k%d", rng.IntN(40))) }
			var free [][]byte // keys lookups found free lately, which enqueues may set later
			for op := range 30_000 {
				switch rng.IntN(3) {
				case 0: // a lookup
					ik := key()
					want, wantOK := model[string(ik)]
					got, ok, err := x.lookup(ik, owns)
					if err != nil {
						t.Fatal(err)
					}
					if ok != wantOK || (ok && got != want) {
						t.Fatalf("op %d: lookup %s = %d, %v; want %d, %v", op, ik, got, ok, want, wantOK)
					}
					if !ok {
						free = append(free[max(0, len(free)-2):], ik)
					}
				case 1: // an enqueue sets a key found free, if still free
					if len(free) == 0 {
						continue
					}
					ik := free[rng.IntN(len(free))]
					if _, taken := model[string(ik)]; taken {
						continue
					}
					id := next
					next++
					holder[id], model[string(ik)] = string(ik), id
					if err := x.set(ik, id, owns); err != nil {
						t.Fatal(err)
					}
				case 2: // a task's removal gives its key back
					ik := key()
					id, ok := model[string(ik)]
					if !ok {
						continue
					}
					if !x.remove(ik, id) {
						t.Fatalf("op %d: remove %s from %d refused", op, ik, id)
					}
					delete(model, string(ik))
					delete(holder, id)
				}
			}
			if x.len() != len(model) {
				t.Fatalf("the index holds %d keys, the map %d", x.len(), len(model))
			}
		})
	}
}
