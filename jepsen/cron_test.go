package jepsen

import (
	"fmt"
	"testing"
	"time"
)

func (b *hb) cron(t int64, task string, slot int64) {
	b.add(t, "cron", FCron, OK, Event{Task: task, Key: fmt.Sprintf("%s@%d", CronSchedule, slot)})
}

// The cron checker passes a redelivered task (one id, one slot) and
// catches a second task for a slot; its note counts a gap.
func TestCatchesSlotEnqueuedTwice(t *testing.T) {
	sec := int64(time.Second)
	b := healthy()
	b.cron(100, "c1", 10*sec)
	b.cron(200, "c1", 10*sec) // the same task again: redelivered after a lost submit
	b.cron(300, "c2", 11*sec)
	b.cron(400, "c4", 13*sec) // 12 never seen
	r := CheckCronOncePerSlot(b.history())
	if r.Verdict != Violate || r.Checked != 3 || r.Note != "3 slots, 1 missing between the first and the last" {
		t.Fatalf("3 slots, below the minimum of %d: %s %v checked %d: %s", MinCronSlots, r.Verdict, r.Violations, r.Checked, r.Note)
	}
	b.cron(410, "c5", 14*sec)
	b.cron(420, "c6", 15*sec)
	r = CheckCronOncePerSlot(b.history())
	if r.Verdict != Pass || r.Checked != 5 || r.Note != "5 slots, 1 missing between the first and the last" {
		t.Fatalf("%s %v checked %d: %s", r.Verdict, r.Violations, r.Checked, r.Note)
	}
	b.cron(500, "c3", 11*sec) // another task for slot 11
	mustCatch(t, CheckCronOncePerSlot(b.history()), "c3")
}
