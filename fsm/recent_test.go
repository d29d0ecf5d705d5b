package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// checkRecent fails unless every entry the record cache would answer
// holds the bytes Pebble holds for its key now, and is indexed under its
// key's hash; and every hot record is Pebble's value, or absent where
// Pebble has none. An entry of prev whose hash cur holds is never
// answered (a lookup stops at cur), so it may be older.
func checkRecent(t testing.TB, f *FSM) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	f.checkpoint() // Pebble then holds what a checkpoint window held
	c := f.recent
	if c == nil {
		t.Fatal("the record cache is off")
	}
	for gen, g := range map[string]*recentGen{"cur": &c.cur, "prev": &c.prev} {
		for h, off := range g.index {
			if off == recentGone {
				continue
			}
			if _, shadowed := c.cur.index[h]; gen == "prev" && shadowed {
				continue
			}
			e := g.arena[off:]
			kl, vl := int(binary.LittleEndian.Uint16(e)), int(binary.LittleEndian.Uint16(e[2:]))
			k, v := e[4:4+kl], e[4+kl:4+kl+vl]
			if recentHash(k) != h {
				t.Fatalf("record cache (%s): %q indexed under another key's hash", gen, k)
			}
			got, closer, err := f.db.Get(k)
			if errors.Is(err, pebble.ErrNotFound) {
				t.Fatalf("record cache (%s) holds %q (%d bytes), Pebble has no such key", gen, k, len(v))
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, v) {
				t.Fatalf("record cache (%s) holds %q = %x, Pebble %x", gen, k, v, got)
			}
			_ = closer.Close()
		}
	}
	for k, e := range c.hot {
		got, closer, err := f.db.Get([]byte(k))
		if errors.Is(err, pebble.ErrNotFound) {
			if !e.absent {
				t.Fatalf("hot records hold %q = %x, Pebble has no such key", k, e.v)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.absent || !bytes.Equal(got, e.v) {
			t.Fatalf("hot records hold %q = %x (absent %v), Pebble %x", k, e.v, e.absent, got)
		}
		_ = closer.Close()
	}
	checkHeaders(t, f)
}

// checkHeaders holds every header the header cache keeps equal to what a
// header read of Pebble gives, format included. f.mu is held.
func checkHeaders(t testing.TB, f *FSM) {
	t.Helper()
	for id, e := range f.recent.headers.m {
		got, format, err := storage.GetTaskHeader(storage.Wrap(f.db), id)
		if err != nil {
			t.Fatalf("header cache holds %s, Pebble: %v", id, err)
		}
		if format != e.format || !proto.Equal(got, e.t) {
			t.Fatalf("header cache holds %s as %v (format %d), Pebble %v (format %d)", id, e.t, e.format, got, format)
		}
	}
}

// recentLen is the number of entries the cache holds.
func recentLen(f *FSM) int { return len(f.recent.cur.index) + len(f.recent.prev.index) }

// recentStats reads the cache's counters.
func recentStatsOf(f *FSM) recentStats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.recent == nil {
		return recentStats{}
	}
	return f.recent.stats
}

// Test_RecentRecordsMatchPebble runs the metamorphic workload (both its
// busy and its many-queue mix, split and inline records, purges, cancels
// and dependency clean-up) with a record cache small enough to rotate
// often, and checks every cached entry against Pebble: after every entry
// on one replica, after every random-sized batch on another (a batch
// reads its own writes back), after a restore into a replica
// that held other state, and after a reopen.
func Test_RecentRecordsMatchPebble(t *testing.T) {
	opts := Options{RecentRecordBytes: 64 << 10}
	for _, seed := range []uint64{*seedFlag &^ 1, *seedFlag | 1} {
		n := metamorphicOps() / 4
		a := &harness{t: t, dir: t.TempDir(), opts: opts}
		a.f = mustOpen(t, a.dir, opts)
		var snap []byte
		logs, _ := generate(t, a.f, seed, n, func(i int) {
			checkRecent(t, a.f)
			if i == n/2-1 {
				snap = mustSnapshot(t, a.f)
			}
		})
		st := recentStatsOf(a.f)
		if st.hits == 0 || st.rotations == 0 || st.hotHits == 0 {
			t.Fatalf("the workload left the cache idle: %+v", st)
		}
		if hs := a.f.recent.headers.stats; hs.hits == 0 {
			t.Fatalf("the workload left the header cache idle: %+v", hs)
		}
		t.Logf("seed %d: %+v, headers %+v", seed, st, a.f.recent.headers.stats)
		hash := mustHash(t, a.f)
		rng := rand.New(rand.NewPCG(seed, 7))
		inBatches := func(f *FSM, logs []*raft.Log) {
			for i := 0; i < len(logs); {
				k := min(1+rng.IntN(64), len(logs)-i)
				f.ApplyBatch(logs[i : i+k])
				i += k
				checkRecent(t, f)
			}
			if h := mustHash(t, f); h != hash {
				t.Fatalf("hash %s, want %s", h, hash)
			}
		}

		b := &harness{t: t, dir: t.TempDir(), opts: opts}
		b.f = mustOpen(t, b.dir, opts)
		inBatches(b.f, logs)

		c := &harness{t: t, dir: t.TempDir(), opts: opts}
		c.f = mustOpen(t, c.dir, opts)
		c.f.ApplyBatch(logs[:n/4])
		if err := restoreFrom(c.f, snap); err != nil {
			t.Fatal(err)
		}
		if recentLen(c.f) != 0 {
			t.Fatal("a restore kept the old keyspace's cache")
		}
		inBatches(c.f, logs[n/2:])

		d := &harness{t: t, dir: t.TempDir(), opts: opts}
		d.f = mustOpen(t, d.dir, opts)
		d.f.ApplyBatch(logs[:n/2])
		d.reopen()
		if recentLen(d.f) != 0 {
			t.Fatal("a reopen kept the cache")
		}
		inBatches(d.f, logs[n/2:])
	}
}

// Test_RecentRecordsKeepKeyspace: one random log applied to a replica
// without the record cache and, in random batch sizes, to replicas with a
// tiny one (rotating every few writes) and the default one: the same
// answers and the same keyspace hash.
func Test_RecentRecordsKeepKeyspace(t *testing.T) {
	for _, seed := range []uint64{*seedFlag&^1 + 10, *seedFlag | 1 + 10} {
		off := Options{RecentRecordBytes: -1}
		a := &harness{t: t, dir: t.TempDir(), opts: off}
		a.f = mustOpen(t, a.dir, off)
		logs, want := generate(t, a.f, seed, metamorphicOps()/2, nil)
		if a.f.recent != nil {
			t.Fatal("RecentRecordBytes -1 left the cache on")
		}
		hash := mustHash(t, a.f)
		for i, bytes := range []int{4 << 10, 0} {
			opts := Options{RecentRecordBytes: bytes}
			b := &harness{t: t, dir: t.TempDir(), opts: opts}
			b.f = mustOpen(t, b.dir, opts)
			got := applyInBatches(b.f, logs, rand.New(rand.NewPCG(seed, uint64(i))), 128)
			for j := range logs {
				if !answersEqual(want[j], got[j]) {
					t.Fatalf("cache %d: entry %d: answers differ\nwithout: %v\nwith:    %v", bytes, logs[j].Index, want[j], got[j])
				}
			}
			if h := mustHash(t, b.f); h != hash {
				t.Fatalf("cache %d: hash %s, without the cache %s", bytes, h, hash)
			}
			if st := recentStatsOf(b.f); st.hits == 0 {
				t.Fatalf("cache %d: no hits: %+v", bytes, st)
			}
		}
	}
}

// Test_RecentRecordsDiscardedOnApplyPanic: a batch whose submit wrote a
// completed header, then panicked on an undecodable entry, never
// committed; the header it wrote must not be answered later. The same
// submit applied again completes the task, as on a replica without the
// cache, instead of being told the task is already done.
func Test_RecentRecordsDiscardedOnApplyPanic(t *testing.T) {
	for _, level := range []uint32{LevelAttempts, LevelSplitRecords} {
		h := newHarness(t)
		h.do(latchCmd(level))
		h.enqueue(t0, nt("q", "acme", 0))
		task := h.claimOne(at(time.Second), "q", "acme")
		hb := heartbeatCmd(at(2*time.Second), &pb.HeartbeatItem{TaskId: task.GetId(), Fence: task.GetFence()})
		h.one(hb, pb.Code_CODE_OK) // the header is in the cache now
		submit := completeCmd(at(3*time.Second), task.GetId(), task.GetFence())
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("an undecodable entry did not stop apply")
				}
			}()
			h.f.ApplyBatch([]*raft.Log{
				entry(t, h.index+1, submit),
				{Index: h.index + 2, Type: raft.LogCommand, Data: []byte{0xff, 0xff}},
			})
		}()
		checkRecent(t, h.f)
		if got, _ := h.f.GetTask(task.GetId()); got.GetState() != pb.TaskState_TASK_STATE_RUNNING {
			t.Fatalf("level %d: the failed batch changed the task: %v", level, got.GetState())
		}
		h.one(submit, pb.Code_CODE_OK)
		if got, _ := h.f.GetTask(task.GetId()); got.GetState() != pb.TaskState_TASK_STATE_COMPLETED {
			t.Fatalf("level %d: after the submit the task is %v", level, got.GetState())
		}
		checkRecent(t, h.f)
	}
}

// Test_RecentRecordsCollide: with a hash of 256 values, most keys share
// their index slot with others. A lookup must then miss rather than
// answer another key's value or an older value of its own; the keyspace
// and the answers stay those of a replica without the cache.
func Test_RecentRecordsCollide(t *testing.T) {
	defer func(h func([]byte) uint64) { recentHash = h }(recentHash)
	recentHash = func(k []byte) uint64 { return xxhash.Sum64(k) & 0xff }
	seed := *seedFlag + 20
	off := Options{RecentRecordBytes: -1}
	a := &harness{t: t, dir: t.TempDir(), opts: off}
	a.f = mustOpen(t, a.dir, off)
	logs, want := generate(t, a.f, seed, metamorphicOps()/4, nil)
	opts := Options{RecentRecordBytes: 16 << 10}
	b := &harness{t: t, dir: t.TempDir(), opts: opts}
	b.f = mustOpen(t, b.dir, opts)
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < len(logs); {
		k := min(1+rng.IntN(16), len(logs)-i)
		got := b.f.ApplyBatch(logs[i : i+k])
		for j := range got {
			if !answersEqual(want[i+j], got[j]) {
				t.Fatalf("entry %d: answers differ\nwithout: %v\nwith:    %v", logs[i+j].Index, want[i+j], got[j])
			}
		}
		i += k
		checkRecent(t, b.f)
	}
	if mustHash(t, b.f) != mustHash(t, a.f) {
		t.Fatal("keyspaces differ")
	}
	if st := recentStatsOf(b.f); st.hits == 0 {
		t.Fatalf("no hits: %+v", st)
	}
}

// Test_HotRecordsSkipPebble: once a queue has been claimed from, the
// records every claim reads (its catalog record, configuration and
// tenant usage) come from memory, and a write of one of them (pausing
// the queue) is what the next claim reads.
func Test_HotRecordsSkipPebble(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(FeatureLevel))
	for range 20 {
		h.enqueue(at(0), nt("q", "a", 0))
	}
	h.claimOne(at(time.Second), "q", "a") // reads each hot record once
	before := recentStatsOf(h.f)
	for range 10 {
		h.claimOne(at(time.Second), "q", "a")
	}
	after := recentStatsOf(h.f)
	if after.hotMisses != before.hotMisses {
		t.Fatalf("10 claims of a warm queue missed the hot records %d times", after.hotMisses-before.hotMisses)
	}
	if after.hotHits-before.hotHits < 10 {
		t.Fatalf("10 claims hit the hot records %d times", after.hotHits-before.hotHits)
	}
	h.do(setPausedCmd(at(2*time.Second), "q", "a", true))
	if got := h.claim(at(2*time.Second), "q", "a", 1); len(got) != 0 {
		t.Fatalf("a claim of the paused queue took %d tasks: the cache kept the old configuration", len(got))
	}
	h.do(setPausedCmd(at(3*time.Second), "q", "a", false))
	if got := h.claim(at(3*time.Second), "q", "a", 1); len(got) != 1 {
		t.Fatalf("a claim of the resumed queue took %d tasks", len(got))
	}
	checkKeyspace(t, h.f)
}

// Test_NewTaskBehindABacklogIsNotCached: a new task goes into the record
// cache only while its queue's backlog is short enough for a claim to
// reach it there (recentRecords.keepsNew). Behind a longer one its record
// is written around the cache, and a claim across both kinds answers,
// writes and hashes as a replica without the cache.
func Test_NewTaskBehindABacklogIsNotCached(t *testing.T) {
	a, b, c := latchedCachePair(t)
	limit := int(uint64(c.genBytes) / recentBytesAhead)
	ids := enqueueBoth(t, a, b, "q", limit+8)
	for i, id := range ids {
		if cached := c.has(storage.TaskKey(id)); cached != (i < limit) {
			t.Fatalf("task %d, behind %d pending (cached up to %d): cached %v", i, i, limit, cached)
		}
	}
	if n := claimBoth(t, a, b, at(time.Second), uint32(len(ids))); n != len(ids) {
		t.Fatalf("the claim took %d tasks, want %d", n, len(ids))
	}
	if ha, hb := mustHash(t, a.f), mustHash(t, b.f); ha != hb {
		t.Fatalf("hash %s with the cache, %s without it", hb, ha)
	}
	checkKeyspace(t, b.f)
}

// Test_EvictingWhatWasNeverCachedCostsNothing drains a backlog the cache
// never held, as a claim of an old backlog does: each claim evicts the
// pending record it read from Pebble. The cache answered a miss for those
// keys before; a mark for each would only grow the index (a map write per
// claimed task, 4.6 % of a 1M drain's apply) and rotate away what the
// cache does hold.
func Test_EvictingWhatWasNeverCachedCostsNothing(t *testing.T) {
	c := newRecentRecords(1 << 20)
	kept := []byte("t/kept")
	c.put(kept, []byte("record"))
	for i := range 200_000 { // far more marks than a 512 KiB generation's index holds
		c.evict(binary.BigEndian.AppendUint64([]byte("t/old/"), uint64(i)))
	}
	if v, ok := c.get(kept); !ok || string(v) != "record" {
		t.Fatalf("after evicting keys it never held, the cache lost an entry it did hold: %q, %v", v, ok)
	}
	if n := len(c.cur.index) + len(c.prev.index); n != 1 {
		t.Fatalf("evicting keys the cache never held left %d index slots, want the 1 entry", n)
	}
	// An eviction of what either generation holds must still shadow it.
	c.evict(kept)
	if _, ok := c.get(kept); ok {
		t.Fatal("an evicted entry is still answered")
	}
	old := []byte("t/older")
	c.put(old, []byte("v1"))
	c.rotate()
	c.evict(old)
	if _, ok := c.get(old); ok {
		t.Fatal("an entry of the older generation is still answered after its eviction")
	}
}
