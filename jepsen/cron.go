package jepsen

import (
	"context"
	"fmt"
	"strconv"
	"time"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Recurring tasks under faults. The workload puts one schedule that fires
// every second into its own queue, with catch-up, and one process claims
// and completes what it enqueues, recording each claimed task with its
// slot. CheckCronOncePerSlot then asks the one thing the FSM promises for
// schedules: no slot enqueued two tasks, whatever leaders the faults
// made. A redelivered task (the same id claimed again) is not a second
// task.
const (
	// CronQueue is the queue the schedule fills; the ordinary workers do
	// not claim from it, so the checkers of the main queue see none of it.
	CronQueue = "jepsen-cron"
	// CronSchedule is the schedule's name.
	CronSchedule = "jepsen-tick"
	// FCronPut is the put (and, at the drain, the removal) of the
	// schedule; FCron one claimed task of it: Task its id, Key its slot.
	FCronPut = "cron-put"
	FCron    = "cron"
)

// cron puts the schedule (retrying while the cluster has not latched its
// feature level, as during a rolling upgrade from an older build), then
// claims and completes its tasks until the drain finds the queue empty
// after removing the schedule.
func (w *workload) cron(ctx context.Context) {
	proc := w.cfg.ProcPrefix + "cron"
	s := &docketv1.Schedule{Name: CronSchedule, Tenant: Tenant, Queue: CronQueue, Spec: "@every 1s",
		Missed: docketv1.MissedPolicy_MISSED_POLICY_CATCH_UP, CatchupMax: 100}
	for ctx.Err() == nil && !w.draining.Load() {
		op := w.rec.Invoke(Event{Proc: proc, F: FCronPut, Key: CronSchedule})
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _, err := w.cl.PutSchedule(c, s)
		cancel()
		if err == nil {
			w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FCronPut, Key: CronSchedule})
			break
		}
		typ, cls := classify(err)
		w.rec.Record(Event{Proc: proc, Op: op, Type: typ, F: FCronPut, Key: CronSchedule, Err: cls})
		time.Sleep(time.Second)
	}
	removed := false
	for n := 0; n < 1_000_000 && ctx.Err() == nil; n++ {
		if w.draining.Load() && !removed {
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := w.cl.RemoveSchedule(c, Tenant, CronSchedule)
			cancel()
			removed = err == nil
		}
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		tasks, err := w.wcl.Claim(c, &docketv1.ClaimRequest{Queue: CronQueue, Tenant: Tenant, WorkerId: proc,
			LeaseNs: int64(w.cfg.Lease), MaxTasks: 100, WaitNs: int64(time.Second)})
		cancel()
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if len(tasks) == 0 && removed {
			return
		}
		for _, t := range tasks {
			op := w.rec.Invoke(Event{Proc: proc, F: FCron, Task: t.GetId()})
			w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FCron, Task: t.GetId(),
				Key: fmt.Sprintf("%s@%d", t.GetSchedule(), t.GetScheduleSlot())})
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = w.wcl.Submit(c, &docketv1.SubmitRequest{TaskId: t.GetId(), Tenant: Tenant, Fence: t.GetFence(),
				Outcome: docketv1.Outcome_OUTCOME_COMPLETED}) // a lost submit only redelivers the same task
			cancel()
		}
	}
}

// CheckCronOncePerSlot: no slot of the schedule was enqueued as two
// tasks. Its note counts the slots seen and the gaps between them (slots
// no task was seen for, which catch-up should leave only where no leader
// existed for longer than its bound, or at the run's edges).
func CheckCronOncePerSlot(h *History) Result {
	r := newResult("cron-once-per-slot")
	bySlot := map[string]string{}
	var slots []int64
	for _, o := range h.ops(FCron, OK) {
		if first, ok := bySlot[o.Key]; ok {
			if first != o.Task {
				r.violate(o.Task, "slot %s enqueued twice: tasks %s and %s (%s)", o.Key, first, o.Task, h.desc(o))
			}
			continue
		}
		bySlot[o.Key] = o.Task
		if _, at, ok := cutLast(o.Key, '@'); ok {
			if v, err := strconv.ParseInt(at, 10, 64); err == nil {
				slots = append(slots, v)
			}
		}
	}
	r.Checked = len(bySlot)
	lo, hi := int64(0), int64(0)
	for _, s := range slots {
		if lo == 0 || s < lo {
			lo = s
		}
		hi = max(hi, s)
	}
	missing := 0
	if len(slots) > 0 {
		missing = int((hi-lo)/int64(time.Second)) + 1 - len(slots)
	}
	r.Note = fmt.Sprintf("%d slots, %d missing between the first and the last", len(slots), missing)
	atLeast(&r, MinCronSlots, "slots claimed")
	return r
}

func cutLast(s string, sep byte) (string, string, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
