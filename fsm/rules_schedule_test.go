package fsm

import (
	"fmt"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func putScheduleCmd(now int64, s *pb.Schedule) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_PUT_SCHEDULE, Now: now,
		Body: &pb.Command_PutSchedule{PutSchedule: &pb.PutScheduleCmd{Schedule: s}}}
}

func removeScheduleCmd(now int64, tn, name string) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_REMOVE_SCHEDULE, Now: now,
		Body: &pb.Command_RemoveSchedule{RemoveSchedule: &pb.RemoveScheduleCmd{Tenant: tn, Name: name}}}
}

func fireCmd(now int64, tn, name string, slot int64) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_FIRE_SCHEDULE, Now: now,
		Body: &pb.Command_FireSchedule{FireSchedule: &pb.FireScheduleCmd{Tenant: tn, Name: name, Slot: slot}}}
}

// hourly is a schedule of q/a firing at every full hour; t0 is one.
func hourly(name string) *pb.Schedule {
	return &pb.Schedule{Name: name, Tenant: "a", Queue: "q", Spec: "0 * * * *", Payload: []byte("report"), Priority: 4}
}

func scheduleHarness(t *testing.T) *harness {
	h := newHarness(t)
	latch := latchCmd(LevelSchedules)
	latch.Now = at(-24 * time.Hour) // the cases start their clocks before t0
	h.do(latch)
	return h
}

func (h *harness) schedule(tn, name string) *pb.Schedule {
	h.t.Helper()
	s, err := h.f.Schedule(tn, name)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// refused applies a FIRE that must be refused with want and checks it
// changed nothing in the keyspace but the applied index and time.
func (h *harness) refused(cmd *pb.Command, want pb.Code) {
	h.t.Helper()
	before := h.stats("q", "a")
	s, _ := h.f.Schedule(cmd.GetFireSchedule().GetTenant(), cmd.GetFireSchedule().GetName())
	it := h.one(cmd, want)
	if it.GetTaskId() != "" && (want != pb.Code_CODE_ALREADY_DONE || cmd.GetFireSchedule().GetSlot() != s.GetLastSlot()) {
		h.t.Fatalf("a %v refusal names task %s, which it is not about", want, it.GetTaskId())
	}
	if after := h.stats("q", "a"); after.GetPending() != before.GetPending() {
		h.t.Fatalf("a refused fire enqueued: pending %d -> %d", before.GetPending(), after.GetPending())
	}
	if s != nil {
		if got := h.schedule(s.GetTenant(), s.GetName()); got.GetLastSlot() != s.GetLastSlot() || got.GetFired() != s.GetFired() {
			h.t.Fatalf("a refused fire changed the schedule: %v -> %v", s, got)
		}
	}
}

// Test_ScheduleRules is the table of the schedule rules: put, replace,
// remove and the refusals that make FIRE exactly once per slot.
func Test_ScheduleRules(t *testing.T) {
	hour := int64(time.Hour)
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"fire enqueues the template with its slot", func(t *testing.T, h *harness) {
			h.one(putScheduleCmd(at(-time.Minute), hourly("r")), pb.Code_CODE_OK)
			it := h.one(fireCmd(at(time.Second), "a", "r", t0), pb.Code_CODE_OK)
			task := h.task(it.GetTaskId())
			if task.GetSchedule() != "r" || task.GetScheduleSlot() != t0 || string(task.GetPayload()) != "report" ||
				task.GetPriority() != 4 || task.GetState() != pb.TaskState_TASK_STATE_PENDING ||
				task.GetMaxAttempts() != pb.DefaultMaxAttempts || task.GetQueue() != "q" || task.GetTenant() != "a" {
				t.Fatalf("task %v", task)
			}
			s := h.schedule("a", "r")
			if s.GetLastSlot() != t0 || s.GetFired() != 1 || s.GetLastTaskId() != task.GetId() {
				t.Fatalf("schedule %v", s)
			}
			if got := h.claimOne(at(2*time.Second), "q", "a"); got.GetId() != task.GetId() {
				t.Fatalf("claimed %s", got.GetId())
			}
		}},
		{"the same slot twice: ALREADY_DONE", func(t *testing.T, h *harness) {
			h.one(putScheduleCmd(at(-time.Minute), hourly("r")), pb.Code_CODE_OK)
			first := h.one(fireCmd(at(0), "a", "r", t0), pb.Code_CODE_OK)
			// Another leader, its clock behind or ahead, proposes it again.
			h.refused(fireCmd(at(-time.Hour), "a", "r", t0), pb.Code_CODE_ALREADY_DONE)
			h.refused(fireCmd(at(time.Hour), "a", "r", t0), pb.Code_CODE_ALREADY_DONE)
			if s := h.stats("q", "a"); s.GetPending() != 1 {
				t.Fatalf("pending %d", s.GetPending())
			}
			_ = first
		}},
		{"an older slot after a newer: ALREADY_DONE", func(t *testing.T, h *harness) {
			h.one(putScheduleCmd(at(-3*time.Hour), hourly("r")), pb.Code_CODE_OK)
			h.one(fireCmd(at(0), "a", "r", t0), pb.Code_CODE_OK)
			h.refused(fireCmd(at(0), "a", "r", t0-hour), pb.Code_CODE_ALREADY_DONE)
		}},
		{"a slot after now: WRONG_STATE", func(t *testing.T, h *harness) {
			h.one(putScheduleCmd(at(-time.Minute), hourly("r")), pb.Code_CODE_OK)
			h.refused(fireCmd(at(time.Minute), "a", "r", t0+hour), pb.Code_CODE_WRONG_STATE)
			// Time in the log never runs backwards: after a command at
			// t0+1h, the slot is due even in a command stamped earlier.
			h.do(promoteCmd(at(time.Hour), 1))
			h.one(fireCmd(at(time.Minute), "a", "r", t0+hour), pb.Code_CODE_OK)
		}},
		{"not a slot of the spec: INVALID_ARGUMENT item", func(t *testing.T, h *harness) {
			h.one(putScheduleCmd(at(-time.Minute), hourly("r")), pb.Code_CODE_OK)
			h.refused(fireCmd(at(time.Hour), "a", "r", t0+int64(time.Second)), pb.Code_CODE_INVALID_ARGUMENT)
			h.refused(fireCmd(at(time.Hour), "a", "r", t0+1), pb.Code_CODE_INVALID_ARGUMENT)
		}},
		{"a slot before the schedule was put: WRONG_STATE", func(t *testing.T, h *harness) {
			h.one(putScheduleCmd(at(time.Minute), hourly("r")), pb.Code_CODE_OK)
			h.refused(fireCmd(at(time.Hour), "a", "r", t0), pb.Code_CODE_WRONG_STATE)
			h.one(fireCmd(at(time.Hour), "a", "r", t0+hour), pb.Code_CODE_OK)
		}},
		{"unknown schedule: NOT_FOUND", func(t *testing.T, h *harness) {
			h.refused(fireCmd(at(0), "a", "nope", t0), pb.Code_CODE_NOT_FOUND)
			h.one(putScheduleCmd(at(-time.Minute), hourly("r")), pb.Code_CODE_OK)
			h.refused(fireCmd(at(0), "b", "r", t0), pb.Code_CODE_NOT_FOUND) // another tenant's name
		}},
		{"replace keeps the fired slots and moves the floor", func(t *testing.T, h *harness) {
			h.one(putScheduleCmd(at(-time.Hour-time.Minute), hourly("r")), pb.Code_CODE_OK)
			h.one(fireCmd(at(-time.Hour), "a", "r", t0-hour), pb.Code_CODE_OK)
			created := h.schedule("a", "r").GetCreatedAt()
			every := hourly("r")
			every.Spec, every.Payload, every.LastSlot, every.Fired = "*/30 * * * *", []byte("v2"), 1, 99 // owned fields ignored
			it := h.one(putScheduleCmd(at(-time.Minute), every), pb.Code_CODE_OK)
			if it.GetDetail() != "replaced" {
				t.Fatalf("detail %q", it.GetDetail())
			}
			s := h.schedule("a", "r")
			if s.GetLastSlot() != t0-hour || s.GetFired() != 1 || s.GetCreatedAt() != created || s.GetUpdatedAt() != at(-time.Minute) || s.GetSpec() != "*/30 * * * *" {
				t.Fatalf("replaced %v", s)
			}
			// t0-30m is a slot of the new spec, after last_slot, but before
			// the replace: the past of a changed schedule never fires.
			h.refused(fireCmd(at(0), "a", "r", t0-hour/2), pb.Code_CODE_WRONG_STATE)
			h.refused(fireCmd(at(0), "a", "r", t0-hour), pb.Code_CODE_ALREADY_DONE)
			it = h.one(fireCmd(at(0), "a", "r", t0), pb.Code_CODE_OK)
			if string(h.task(it.GetTaskId()).GetPayload()) != "v2" {
				t.Fatal("the replace did not change the template")
			}
		}},
		{"remove: no more fires, the tasks stay", func(t *testing.T, h *harness) {
			h.one(putScheduleCmd(at(-time.Minute), hourly("r")), pb.Code_CODE_OK)
			it := h.one(fireCmd(at(0), "a", "r", t0), pb.Code_CODE_OK)
			h.one(removeScheduleCmd(at(0), "a", "r"), pb.Code_CODE_OK)
			h.one(removeScheduleCmd(at(0), "a", "r"), pb.Code_CODE_NOT_FOUND)
			h.refused(fireCmd(at(time.Hour), "a", "r", t0+hour), pb.Code_CODE_NOT_FOUND)
			h.task(it.GetTaskId())
			// Put again under the same name: a new schedule, whose floor is
			// its own creation, so old slots stay unfired.
			h.one(putScheduleCmd(at(time.Hour+time.Minute), hourly("r")), pb.Code_CODE_OK)
			h.refused(fireCmd(at(time.Hour+time.Minute), "a", "r", t0+hour), pb.Code_CODE_WRONG_STATE)
		}},
		{"catch up fires oldest first, skip only the newest", func(t *testing.T, h *harness) {
			cu := hourly("cu")
			cu.Missed, cu.CatchupMax = pb.MissedPolicy_MISSED_POLICY_CATCH_UP, 2
			h.one(putScheduleCmd(at(-5*time.Hour), cu), pb.Code_CODE_OK)
			h.one(putScheduleCmd(at(-5*time.Hour), hourly("sk")), pb.Code_CODE_OK)
			// Four slots are due at t0; the leader picks by policy.
			for _, name := range []string{"cu", "sk"} {
				slots, err := DueSlots(h.schedule("a", name), at(time.Second))
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]int{"cu": 2, "sk": 1}[name]
				if len(slots) != want || slots[len(slots)-1] != t0 {
					t.Fatalf("%s due %v", name, slots)
				}
				for _, s := range slots {
					h.one(fireCmd(at(time.Second), "a", name, s), pb.Code_CODE_OK)
				}
			}
			if s := h.stats("q", "a"); s.GetPending() != 3 {
				t.Fatalf("pending %d, want 3", s.GetPending())
			}
			if got, _ := DueSlots(h.schedule("a", "cu"), at(time.Second)); len(got) != 0 {
				t.Fatalf("due after firing: %v", got)
			}
		}},
		{"over a tenant limit: refused, the slot stays unfired", func(t *testing.T, h *harness) {
			h.enqueue(at(-time.Hour), nt("other", "a", 0))
			h.one(putScheduleCmd(at(-time.Minute), hourly("r")), pb.Code_CODE_OK)
			c := fireCmd(at(0), "a", "r", t0)
			StampTenantLimits(c, 1, 0)
			h.refused(c, pb.Code_CODE_RESOURCE_EXHAUSTED)
			h.one(fireCmd(at(0), "a", "r", t0), pb.Code_CODE_OK) // room again (no limit stamped)
		}},
		{"a tenant keeps at most MaxSchedules", func(t *testing.T, h *harness) {
			for i := range MaxSchedules {
				s := hourly(fmt.Sprint("s", i))
				h.one(putScheduleCmd(at(0), s), pb.Code_CODE_OK)
			}
			h.one(putScheduleCmd(at(0), hourly("one-more")), pb.Code_CODE_RESOURCE_EXHAUSTED)
			h.one(putScheduleCmd(at(0), hourly("s7")), pb.Code_CODE_OK) // a replace is not a new one
			other := hourly("one-more")
			other.Tenant = "b"
			h.one(putScheduleCmd(at(0), other), pb.Code_CODE_OK)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, scheduleHarness(t)) })
	}
}

// Test_ScheduleValidate: a bad schedule is refused whole, naming its
// field, before it is stored.
func Test_ScheduleValidate(t *testing.T) {
	cases := []struct {
		field string
		edit  func(s *pb.Schedule)
	}{
		{"name", func(s *pb.Schedule) { s.Name = "a/b" }},
		{"queue", func(s *pb.Schedule) { s.Queue = "" }},
		{"tenant", func(s *pb.Schedule) { s.Tenant = "" }},
		{"spec", func(s *pb.Schedule) { s.Spec = "0 25 * * *" }},
		{"spec", func(s *pb.Schedule) { s.Spec = "@every 10ms" }},
		{"zone", func(s *pb.Schedule) { s.Zone = "Europe/Atlantis" }},
		{"priority", func(s *pb.Schedule) { s.Priority = 10 }},
		{"max_attempts", func(s *pb.Schedule) { s.MaxAttempts = MaxAttemptsLimit + 1 }},
		{"retention_ns", func(s *pb.Schedule) { s.RetentionNs = -1 }},
		{"catchup_max", func(s *pb.Schedule) { s.CatchupMax = 3 }},
		{"catchup_max", func(s *pb.Schedule) { s.Missed, s.CatchupMax = pb.MissedPolicy_MISSED_POLICY_CATCH_UP, MaxCatchUp+1 }},
		{"missed", func(s *pb.Schedule) { s.Missed = 7 }},
		{"payload", func(s *pb.Schedule) { s.Payload = make([]byte, PayloadCeiling+1) }},
	}
	h := scheduleHarness(t)
	for _, c := range cases {
		s := hourly("r")
		c.edit(s)
		res := h.apply(putScheduleCmd(at(0), s))
		if res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT || res.GetErrorField() != c.field {
			t.Errorf("%s: answered %v on %q (%s)", c.field, res.GetErrorCode(), res.GetErrorField(), res.GetErrorDetail())
		}
	}
	for _, c := range []*pb.Command{
		fireCmd(at(0), "a", "r", 0),
		fireCmd(at(0), "", "r", t0),
		removeScheduleCmd(at(0), "a", ""),
		{Type: pb.CommandType_COMMAND_TYPE_FIRE_SCHEDULE, Now: at(0)},
	} {
		if res := h.apply(c); res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT {
			t.Errorf("%v answered %v", c, res.GetErrorCode())
		}
	}
	if _, err := h.f.Schedule("a", "r"); err == nil {
		t.Fatal("a refused schedule was stored")
	}
}

// Test_ListSchedules pages by name within one tenant, and a cursor of
// another tenant's listing is refused.
func Test_ListSchedules(t *testing.T) {
	h := scheduleHarness(t)
	for _, n := range []string{"c", "a", "b"} {
		h.one(putScheduleCmd(at(0), hourly(n)), pb.Code_CODE_OK)
	}
	other := hourly("z")
	other.Tenant = "b"
	h.one(putScheduleCmd(at(0), other), pb.Code_CODE_OK)
	got, next, err := h.f.ListSchedules("a", "")
	if err != nil || next != "" || len(got) != 3 || got[0].GetName() != "a" || got[2].GetName() != "c" {
		t.Fatalf("list %v %q %v", got, next, err)
	}
	if _, _, err := h.f.ListSchedules("a", "bm90LWEtY3Vyc29y"); err == nil {
		t.Fatal("a foreign cursor was accepted")
	}
	n := 0
	var after []byte
	for {
		after, err = h.f.ScanSchedules(after, 2, func(*pb.Schedule) error { n++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if after == nil {
			break
		}
	}
	if n != 4 {
		t.Fatalf("scan saw %d schedules, want 4", n)
	}
}
