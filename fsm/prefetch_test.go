package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/dockethq/docket/storage"
)

// Test_ClaimPrefetchKeepsAnswers: claims of 20 from a backlog whose
// records and bodies the record cache no longer holds read them through
// the prefetch iterator, and answer, write and hash exactly as a replica
// without the cache does. Split records (with a body too large for the
// cache, and without a body) are in the backlog at both levels, and whole
// ones from LevelInlineBodies, whose bodies the prefetch does not seek.
func Test_ClaimPrefetchKeepsAnswers(t *testing.T) {
	for _, level := range []uint32{FeatureLevel, LevelExpiryInMemory} {
		a, b, c := latchedCachePairAt(t, level)
		var ids []string
		for i := range 1000 {
			var id string
			for _, h := range []*harness{a, b} {
				task := nt("q", "a", 0)
				switch i % 50 {
				case 7:
					task.Payload = make([]byte, 4<<10) // past recentMaxValue
				case 9:
					task.Payload = nil
				}
				id = h.enqueue(at(0), task)[0]
			}
			ids = append(ids, id)
		}
		// The values a claim reads through the prefetch: each head's record,
		// and its body when split with one, unless the cache holds it.
		values := 0
		for i, id := range ids[:400] {
			if c.has(storage.TaskKey(id)) {
				continue
			}
			values++
			if i%50 == 7 || (i%50 != 9 && level < LevelInlineBodies) {
				values++
			}
		}
		before := recentStatsOf(b.f)
		for i := range 20 {
			if n := claimBoth(t, a, b, at(time.Duration(i+1)*time.Second), 20); n != 20 {
				t.Fatalf("level %d: claim %d took %d tasks, want 20", level, i, n)
			}
		}
		if got := recentStatsOf(b.f).prefetched - before.prefetched; got != uint64(values) || values < 300 {
			t.Fatalf("level %d: claims of 400 tasks prefetched %d values, want the %d of those the cache did not hold", level, got, values)
		}
		if ha, hb := mustHash(t, a.f), mustHash(t, b.f); ha != hb {
			t.Fatalf("level %d: hash %s with the prefetch, %s without the cache", level, hb, ha)
		}
		checkKeyspace(t, b.f)
	}
}

// Test_ClaimPrefetchMixedHeads covers the claims whose heads the cache
// holds in part: the prefetch decides from the first and last head, so
// it asks about each head when they disagree, and reads nothing when both
// are cached though heads between them are not. Either way the answers,
// writes and hash are a cacheless replica's.
func Test_ClaimPrefetchMixedHeads(t *testing.T) {
	a, b, c := latchedCachePair(t)
	enqueue := func(q string, n int) []string { return enqueueBoth(t, a, b, q, n) }
	// fill pushes earlier records out of both generations. It spreads
	// its tasks over queues with short backlogs: a new task behind a long
	// one is not cached at all (recentRecords.keepsNew).
	fill := func() {
		for i := range 40 {
			enqueue(fmt.Sprintf("other%d", i), 20)
		}
	}
	claim := func(now int64, n uint32) {
		t.Helper()
		if claimBoth(t, a, b, now, n) == 0 {
			t.Fatal("the claim took nothing")
		}
	}
	// Cold heads, then hot ones behind them: the ends disagree.
	cold := enqueue("q", 20)
	fill()
	if c.has(storage.TaskKey(cold[0])) {
		t.Fatal("the first task of q is still cached: the test needs more filler")
	}
	enqueue("q", 10)
	missing := 0
	for _, id := range cold {
		for _, k := range [][]byte{storage.TaskKey(id), append(append([]byte(nil), storage.BodyPrefix()...), id...)} {
			if _, closer, err := b.f.db.Get(k); err == nil && !c.has(k) {
				missing++ // a record, or a body that exists, the cache misses
				_ = closer.Close()
			}
		}
	}
	before := c.stats.prefetched
	claim(at(time.Second), 30)
	// Asked about each head, it reads the records and bodies of the heads
	// the cache misses; had it read every head's, it would have read 60.
	if got := c.stats.prefetched - before; got != uint64(missing) || missing < prefetchMin {
		t.Fatalf("a claim of 20 cold and 10 hot heads prefetched %d values, the cache missed %d", got, missing)
	}
	// Both ends cached, the heads between them not: nothing is
	// prefetched, and getTask reads the rest.
	cold = enqueue("q", 30)
	fill()
	for _, id := range []string{cold[0], cold[len(cold)-1]} {
		v, closer, err := b.f.db.Get(storage.TaskKey(id))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		c.put(storage.TaskKey(id), v)
		_ = closer.Close()
	}
	before = c.stats.prefetched
	claim(at(2*time.Second), 30)
	if got := c.stats.prefetched - before; got != 0 {
		t.Fatalf("a claim whose ends are cached prefetched %d values", got)
	}
	if ha, hb := mustHash(t, a.f), mustHash(t, b.f); ha != hb {
		t.Fatalf("hash %s with the prefetch, %s without the cache", hb, ha)
	}
}

// cachePair opens two replicas: a without the record cache, b with one
// that has room for a claim's records and bodies, not for a backlog's.
func cachePair(t *testing.T) (a, b *harness) {
	off, on := Options{RecentRecordBytes: -1}, Options{RecentRecordBytes: 64 << 10}
	a = &harness{t: t, dir: t.TempDir(), opts: off}
	a.f = mustOpen(t, a.dir, off)
	b = &harness{t: t, dir: t.TempDir(), opts: on}
	b.f = mustOpen(t, b.dir, on)
	return a, b
}

// latchedCachePair is cachePair at this build's feature level, with b's
// record cache.
func latchedCachePair(t *testing.T) (a, b *harness, c *recentRecords) {
	return latchedCachePairAt(t, FeatureLevel)
}

// latchedCachePairAt is latchedCachePair at level.
func latchedCachePairAt(t *testing.T, level uint32) (a, b *harness, c *recentRecords) {
	a, b = cachePair(t)
	a.do(latchCmd(level))
	b.do(latchCmd(level))
	b.f.mu.RLock()
	c = b.f.recent
	b.f.mu.RUnlock()
	return a, b, c
}

// enqueueBoth enqueues n tasks of q/a, one entry each, on both replicas,
// fails unless they get the same ids, and returns the ids.
func enqueueBoth(t *testing.T, a, b *harness, q string, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		id := a.enqueue(at(0), nt(q, "a", 0))[0]
		if got := b.enqueue(at(0), nt(q, "a", 0))[0]; got != id {
			t.Fatalf("ids %s and %s", id, got)
		}
		ids = append(ids, id)
	}
	return ids
}

// claimBoth claims up to n tasks of q/a at now on both replicas, fails
// unless b answers exactly as a, checks b's cache against Pebble, and
// returns how many were claimed.
func claimBoth(t *testing.T, a, b *harness, now int64, n uint32) int {
	t.Helper()
	want, got := a.claim(now, "q", "a", n), b.claim(now, "q", "a", n)
	if len(got) != len(want) {
		t.Fatalf("%d tasks without the cache, %d with it", len(want), len(got))
	}
	for j := range want {
		if !answersEqual(want[j], got[j]) {
			t.Fatalf("task %d: without the cache %v\nwith it %v", j, want[j], got[j])
		}
	}
	checkRecent(t, b.f)
	return len(want)
}
