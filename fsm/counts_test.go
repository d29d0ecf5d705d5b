package fsm

import (
	"testing"
	"time"
)

func Test_CountsMatchesStats(t *testing.T) {
	h := newHarness(t)
	check := func(wantPending, wantDelayed uint64) {
		t.Helper()
		p, d, err := h.f.Counts("q", "t")
		if err != nil {
			t.Fatal(err)
		}
		st := h.stats("q", "t")
		if p != wantPending || d != wantDelayed || p != st.GetPending() || d != st.GetDelayed() {
			t.Fatalf("Counts = %d pending %d delayed, want %d %d (Stats %d %d)",
				p, d, wantPending, wantDelayed, st.GetPending(), st.GetDelayed())
		}
	}
	check(0, 0) // unknown queue: zero, no error
	delayed := nt("q", "t", 0)
	delayed.DelayNs = int64(time.Hour)
	h.enqueue(at(0), nt("q", "t", 0), nt("q", "t", 5), delayed)
	check(2, 1)
	h.claimOne(at(time.Second), "q", "t")
	check(1, 1)
}
