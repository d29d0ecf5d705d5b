package fsm

import (
	"fmt"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// scheduleSpecs are the workload's specs: dense ones that fire within a
// run of a few thousand entries (about 0.75 s each) and a sparse one.
var scheduleSpecs = []string{"@every 1s", "@every 7s", "* * * * *", "*/2 * * * *", "0 * * * *"}

// scheduleCmd puts (adds or replaces), removes or fires a schedule of a
// few names per tenant. Fires are mostly what a leader would propose (the
// due slots by policy, from f's own state), and sometimes slots already
// fired, not yet due or not slots at all, as a stale or skewed leader
// would: refused the same way on every replica.
func (w *workload) scheduleCmd(f *FSM, now int64) *pb.Command {
	q := w.queue()
	name := fmt.Sprint("sched", w.rng.IntN(3))
	switch n := w.rng.IntN(100); {
	case n < 15:
		s := &pb.Schedule{Name: name, Tenant: q.Tenant, Queue: q.Queue,
			Spec: scheduleSpecs[w.rng.IntN(len(scheduleSpecs))], Payload: []byte(fmt.Sprint("tick ", w.index)),
			Priority: uint32(w.rng.IntN(10))}
		if w.pct(30) {
			s.Zone = "Europe/Berlin"
		}
		if w.pct(40) {
			s.Missed, s.CatchupMax = pb.MissedPolicy_MISSED_POLICY_CATCH_UP, uint32(w.rng.IntN(4))
		}
		return putScheduleCmd(now, s)
	case n < 20:
		return removeScheduleCmd(now, q.Tenant, name)
	}
	s, err := f.Schedule(q.Tenant, name)
	if err != nil {
		return fireCmd(now, q.Tenant, name, now-now%int64(time.Second)) // NOT_FOUND, mostly
	}
	slot := s.GetLastSlot()
	if due, err := DueSlots(s, now); err == nil && len(due) > 0 {
		slot = due[w.rng.IntN(len(due))]
	}
	switch {
	case w.pct(10):
		slot += int64(time.Minute) // likely not due
	case w.pct(10):
		slot += int64(time.Millisecond) // not a slot
	}
	if slot <= 0 {
		slot = 1
	}
	c := fireCmd(now, q.Tenant, name, slot)
	if w.pct(20) {
		StampTenantLimits(c, uint64(20+w.rng.IntN(60)), 0)
	}
	return c
}

// Test_WorkloadFiresOncePerSlot runs the metamorphic workload, whose
// leader fires schedules among stale, early and bogus slots, removes and
// re-adds them, and checks what the FSM kept: tasks were fired, and no
// two tasks hold one (tenant, schedule, slot), each slot one of its spec.
func Test_WorkloadFiresOncePerSlot(t *testing.T) {
	h := newHarness(t)
	generate(t, h.f, *seedFlag, 5000, nil)
	seen := map[string]string{}
	for _, task := range readKeyspace(t, h.f).tasks {
		if task.GetSchedule() == "" {
			continue
		}
		if task.GetScheduleSlot()%int64(time.Second) != 0 {
			t.Fatalf("task %s holds slot %d, not a whole second", task.GetId(), task.GetScheduleSlot())
		}
		k := fmt.Sprint(task.GetTenant(), "/", task.GetSchedule(), "/", task.GetScheduleSlot())
		if other, dup := seen[k]; dup {
			t.Fatalf("tasks %s and %s both fired %s", other, task.GetId(), k)
		}
		seen[k] = task.GetId()
	}
	if len(seen) < 10 {
		t.Fatalf("the workload fired %d slots; it should exercise FIRE", len(seen))
	}
	t.Logf("%d slots fired", len(seen))
}
