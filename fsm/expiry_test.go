package fsm

import (
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Test_ExpiryAcrossTheLatch: below LevelExpiryInMemory each finished task
// keeps an e/ key; the latch deletes them all in its own entry, no later
// end stores one, and the tasks finished before the latch are still
// purged when their retention ends, through a reopen, and not before.
func Test_ExpiryAcrossTheLatch(t *testing.T) {
	h := newHarness(t)
	h.do(latchCmd(LevelExpiryInMemory - 1))
	_, early := h.enqueueKeys(at(0), keys("early", 50))
	for _, id := range early {
		h.one(cancelCmd(at(0), id), pb.Code_CODE_OK) // retention 1 s: expires at 1 s
	}
	if got := countKeys(t, h.f, storage.ExpirePrefix()); got != 50 {
		t.Fatalf("below the latch %d e/ keys, want 50", got)
	}
	checkKeyspace(t, h.f)
	h.do(latchCmd(LevelExpiryInMemory))
	if got := countKeys(t, h.f, storage.ExpirePrefix()); got != 0 {
		t.Fatalf("after the latch %d e/ keys, want none", got)
	}
	_, late := h.enqueueKeys(at(time.Second), keys("late", 50))
	for _, id := range late {
		h.one(cancelCmd(at(time.Second), id), pb.Code_CODE_OK) // expires at 2 s
	}
	if got := countKeys(t, h.f, storage.ExpirePrefix()); got != 0 {
		t.Fatalf("ends after the latch stored %d e/ keys", got)
	}
	checkKeyspace(t, h.f)
	h.reopen()
	checkKeyspace(t, h.f)
	if d, e, err := h.f.HasDue(at(time.Second) - 1); err != nil || d || e {
		t.Fatalf("HasDue before any retention ended: delayed %v, expired %v, %v", d, e, err)
	}
	if _, e, err := h.f.HasDue(at(time.Second)); err != nil || !e {
		t.Fatalf("HasDue when the early ones expire: expired %v, %v; want true", e, err)
	}
	purged := h.do(purgeCmd(at(time.Second+time.Millisecond), 1000)).GetItems()
	if len(purged) != 50 {
		t.Fatalf("purge at 1 s took %d tasks, want the 50 early ones", len(purged))
	}
	for i, it := range purged {
		if it.GetTaskId() != early[i] {
			t.Fatalf("purge item %d is %s, want %s (the order of expiry, then id)", i, it.GetTaskId(), early[i])
		}
	}
	checkKeyspace(t, h.f)
	if got := h.do(purgeCmd(at(2*time.Second+time.Millisecond), 1000)).GetItems(); len(got) != 50 {
		t.Fatalf("purge at 2 s took %d tasks, want the 50 late ones", len(got))
	}
	checkKeyspace(t, h.f)
	if n := len(h.f.ready.dumpExpiry()); n != 0 {
		t.Fatalf("expiry order holds %d tasks after every purge", n)
	}
}
