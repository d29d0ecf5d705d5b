package fsm

import (
	"testing"
	"time"
)

// Test_ClaimPrefetchKeepsAnswers: claims of 20 from a backlog whose
// records and bodies the record cache no longer holds read them through
// the prefetch iterator, and answer, write and hash exactly as a replica
// without the cache does. Split and inline records, a body too large for
// the cache and an empty body are all in the backlog.
func Test_ClaimPrefetchKeepsAnswers(t *testing.T) {
	off := Options{RecentRecordBytes: -1}
	// Room for a claim's records and bodies, not for the backlog's.
	on := Options{RecentRecordBytes: 64 << 10}
	a := &harness{t: t, dir: t.TempDir(), opts: off}
	a.f = mustOpen(t, a.dir, off)
	b := &harness{t: t, dir: t.TempDir(), opts: on}
	b.f = mustOpen(t, b.dir, on)
	for _, h := range []*harness{a, b} {
		h.do(latchCmd(FeatureLevel))
		for i := range 1000 {
			task := nt("q", "a", 0)
			switch i % 50 {
			case 7:
				task.Payload = make([]byte, 4<<10) // past recentMaxValue
			case 9:
				task.Payload = nil
			}
			h.enqueue(at(0), task)
		}
	}
	before := recentStatsOf(b.f)
	for i := range 20 {
		now := at(time.Duration(i+1) * time.Second)
		want, got := a.claim(now, "q", "a", 20), b.claim(now, "q", "a", 20)
		if len(want) != 20 || len(got) != len(want) {
			t.Fatalf("claim %d: %d tasks without the cache, %d with it", i, len(want), len(got))
		}
		for j := range want {
			if !answersEqual(want[j], got[j]) {
				t.Fatalf("claim %d, task %d: without the cache %v\nwith it %v", i, j, want[j], got[j])
			}
		}
		checkRecent(t, b.f)
	}
	if st := recentStatsOf(b.f); st.prefetched-before.prefetched < 400 {
		t.Fatalf("claims of 400 cold tasks prefetched %d values", st.prefetched-before.prefetched)
	}
	if ha, hb := mustHash(t, a.f), mustHash(t, b.f); ha != hb {
		t.Fatalf("hash %s with the prefetch, %s without the cache", hb, ha)
	}
	checkKeyspace(t, b.f)
}
