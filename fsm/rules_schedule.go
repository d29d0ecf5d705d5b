package fsm

import (
	"errors"
	"fmt"

	"github.com/dockethq/docket/fsm/cronspec"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Bounds of schedules (recurring tasks).
const (
	// MaxSpecLen bounds a schedule's cron spec.
	MaxSpecLen = 256
	// MaxSchedules is how many schedules one tenant may keep: every one
	// costs the leader's scheduler a look each round.
	MaxSchedules = 1000
	// MaxCatchUp bounds how many missed slots one round of the scheduler
	// fires for one schedule under MISSED_POLICY_CATCH_UP.
	MaxCatchUp = 100
)

// validateSchedule checks what a caller sets on a schedule; the fields the
// FSM owns (last_slot, created_at, ...) are ignored, since the rule
// overwrites them.
func validateSchedule(s *pb.Schedule, maxP int) error {
	if s == nil {
		return fieldErr("schedule", "missing")
	}
	if err := checkName("name", s.GetName()); err != nil {
		return err
	}
	if err := checkQueue("", s.GetQueue(), s.GetTenant()); err != nil {
		return err
	}
	if _, err := ParseCronSpec(s.GetSpec(), s.GetZone()); err != nil {
		if _, zerr := cronspec.LoadZone(s.GetZone()); zerr != nil {
			return fieldErr("zone", "%v", zerr)
		}
		return fieldErr("spec", "%v", err)
	}
	if len(s.GetPayload()) > maxP {
		return tooLarge("payload", len(s.GetPayload()), maxP)
	}
	if s.GetPriority() > MaxPriority {
		return fieldErr("priority", "%d not in 0..%d", s.GetPriority(), MaxPriority)
	}
	if n := len(s.GetKey()); n > MaxKeyBytes {
		return fieldErr("key", "%d bytes, over %d", n, MaxKeyBytes)
	}
	if s.GetMaxAttempts() > MaxAttemptsLimit {
		return fieldErr("max_attempts", "%d > %d", s.GetMaxAttempts(), MaxAttemptsLimit)
	}
	if err := checkDuration("retention_ns", s.GetRetentionNs(), MaxRetention); err != nil {
		return err
	}
	switch s.GetMissed() {
	case pb.MissedPolicy_MISSED_POLICY_UNSPECIFIED, pb.MissedPolicy_MISSED_POLICY_SKIP:
		if s.GetCatchupMax() != 0 {
			return fieldErr("catchup_max", "only with the catch-up policy")
		}
	case pb.MissedPolicy_MISSED_POLICY_CATCH_UP:
		if s.GetCatchupMax() > MaxCatchUp {
			return fieldErr("catchup_max", "%d not in 0..%d", s.GetCatchupMax(), MaxCatchUp)
		}
	default:
		return fieldErr("missed", "unknown policy %d", s.GetMissed())
	}
	return nil
}

func validateFireSchedule(c *pb.FireScheduleCmd) error {
	if err := checkName("tenant", c.GetTenant()); err != nil {
		return err
	}
	if err := checkName("name", c.GetName()); err != nil {
		return err
	}
	if c.GetSlot() <= 0 || c.GetSlot() > MaxTime {
		return fieldErr("slot", "%d not in 1..%d", c.GetSlot(), MaxTime)
	}
	return nil
}

// putSchedule adds a schedule or replaces one. A replace keeps what the
// FSM owns (last_slot, created_at, fired, last_task_id), so it cannot
// make a slot fire twice, and sets updated_at, so that a changed spec
// fires no slot of the past either.
func (tx *txn) putSchedule(c *pb.PutScheduleCmd, res *pb.CommandResult) error {
	in := c.GetSchedule()
	tn, name := in.GetTenant(), in.GetName()
	old, err := storage.GetSchedule(tx.r, tn, name)
	created := errors.Is(err, storage.ErrNotFound)
	if err != nil && !created {
		return err
	}
	if created {
		n, err := storage.CountSchedules(tx.r, tn, MaxSchedules)
		if err != nil {
			return fmt.Errorf("count schedules of %s: %w", tn, err)
		}
		if n >= MaxSchedules {
			res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_RESOURCE_EXHAUSTED,
				Detail: fmt.Sprintf("tenant %s has %d schedules, the most it may keep", tn, MaxSchedules)})
			return nil
		}
	}
	s := &pb.Schedule{
		Name: name, Tenant: tn, Queue: in.GetQueue(),
		Spec: in.GetSpec(), Zone: in.GetZone(),
		Payload: in.GetPayload(), Priority: in.GetPriority(),
		MaxAttempts: in.GetMaxAttempts(), RetentionNs: in.GetRetentionNs(),
		Missed: in.GetMissed(), CatchupMax: in.GetCatchupMax(),
		CreatedAt: tx.now, UpdatedAt: tx.now,
	}
	if tx.feature >= LevelFairQueues {
		s.Key = in.GetKey()
	}
	detail := "created"
	if !created {
		detail = "replaced"
		s.CreatedAt, s.LastSlot, s.Fired, s.LastTaskId = old.GetCreatedAt(), old.GetLastSlot(), old.GetFired(), old.GetLastTaskId()
	}
	if err := storage.PutSchedule(&tx.b, s); err != nil {
		return err
	}
	res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_OK, Detail: detail})
	return nil
}

// removeSchedule deletes a schedule; the tasks it enqueued stay.
func (tx *txn) removeSchedule(c *pb.RemoveScheduleCmd, res *pb.CommandResult) error {
	_, err := storage.GetSchedule(tx.r, c.GetTenant(), c.GetName())
	if errors.Is(err, storage.ErrNotFound) {
		res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_NOT_FOUND, Detail: "no such schedule"})
		return nil
	}
	if err != nil {
		return err
	}
	if err := storage.DeleteSchedule(&tx.b, c.GetTenant(), c.GetName()); err != nil {
		return fmt.Errorf("remove schedule %s/%s: %w", c.GetTenant(), c.GetName(), err)
	}
	res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_OK})
	return nil
}

// fireSchedule enqueues the task of one slot. The refusals are what make
// it exactly once per slot whatever the leaders propose: a slot must be a
// slot of the stored spec, after last_slot (ALREADY_DONE otherwise) and
// after the last change of the schedule, and not after the command's time
// (WRONG_STATE otherwise). A refusal changes nothing.
func (tx *txn) fireSchedule(c *pb.FireScheduleCmd, res *pb.CommandResult) error {
	tn, name, slot := c.GetTenant(), c.GetName(), c.GetSlot()
	s, err := storage.GetSchedule(tx.r, tn, name)
	if errors.Is(err, storage.ErrNotFound) {
		res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_NOT_FOUND, Detail: "no such schedule"})
		return nil
	}
	if err != nil {
		return err
	}
	refuse := func(code pb.Code, format string, args ...any) error {
		it := &pb.ItemResult{Code: code, Detail: fmt.Sprintf(format, args...)}
		if code == pb.Code_CODE_ALREADY_DONE && slot == s.GetLastSlot() {
			it.TaskId = s.GetLastTaskId() // the task this slot enqueued
		}
		res.Items = append(res.Items, it)
		return nil
	}
	switch {
	case slot <= s.GetLastSlot():
		return refuse(pb.Code_CODE_ALREADY_DONE, "slot %d at or before the last slot fired, %d", slot, s.GetLastSlot())
	case slot <= s.GetUpdatedAt():
		return refuse(pb.Code_CODE_WRONG_STATE, "slot %d at or before the schedule's last change, %d", slot, s.GetUpdatedAt())
	case slot > tx.now:
		return refuse(pb.Code_CODE_WRONG_STATE, "slot %d is not due at %d", slot, tx.now)
	}
	spec, err := ParseCronSpec(s.GetSpec(), s.GetZone())
	if err != nil {
		// Validated when it was put, by this build's parser and zones;
		// an error here is the same on every replica of this build.
		return refuse(pb.Code_CODE_INVALID_ARGUMENT, "stored spec: %v", err)
	}
	if !spec.IsSlot(slot) {
		return refuse(pb.Code_CODE_INVALID_ARGUMENT, "%d is not a slot of %q in %q", slot, s.GetSpec(), s.GetZone())
	}
	t := &pb.Task{
		Id:           TaskID(tx.index, tx.base),
		Queue:        s.GetQueue(),
		Tenant:       tn,
		Payload:      s.GetPayload(),
		Priority:     s.GetPriority(),
		MaxAttempts:  s.GetMaxAttempts(),
		RetentionNs:  s.GetRetentionNs(),
		CreatedAt:    tx.now,
		VisibleAt:    tx.now,
		Seq:          tx.nextSeq(0),
		State:        pb.TaskState_TASK_STATE_PENDING,
		Schedule:     name,
		ScheduleSlot: slot,
	}
	if tx.feature >= LevelFairQueues {
		t.Key = s.GetKey()
	}
	if t.MaxAttempts == 0 {
		t.MaxAttempts = pb.DefaultMaxAttempts
	}
	if t.RetentionNs == 0 {
		t.RetentionNs = int64(pb.DefaultRetention)
	}
	if lim := c.GetLimits(); lim != nil {
		why, err := tx.overLimit(tn, lim, int(taskBytes(t)))
		if err != nil {
			return err
		}
		if why != "" {
			// As Enqueue: nothing stored. The slot stays unfired, so the
			// scheduler tries it again while it is the newest due one.
			return refuse(pb.Code_CODE_RESOURCE_EXHAUSTED, "%s", why)
		}
	}
	if err := tx.write(t, pb.TaskState_TASK_STATE_UNSPECIFIED, 0); err != nil {
		return err
	}
	if err := tx.debounce(t); err != nil {
		return err
	}
	s.LastSlot, s.LastTaskId = slot, t.GetId()
	s.Fired++
	if err := storage.PutSchedule(&tx.b, s); err != nil {
		return err
	}
	res.Items = append(res.Items, item(pb.Code_CODE_OK, t.GetId(), t, ""))
	return nil
}

// Schedule reads one schedule from the local replica; ErrNotFound when
// absent.
func (f *FSM) Schedule(tenant, name string) (*pb.Schedule, error) {
	r, release, err := f.reader()
	if err != nil {
		return nil, err
	}
	defer release()
	s, err := storage.GetSchedule(r, tenant, name)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("schedule %s/%s: %w", tenant, name, pb.ErrNotFound)
	}
	return s, err
}

// ListSchedules pages through a tenant's schedules on the local replica,
// by name, within AnswerBudget bytes (at least one).
func (f *FSM) ListSchedules(tenant, cursor string) ([]*pb.Schedule, string, error) {
	r, release, err := f.view()
	if err != nil {
		return nil, "", err
	}
	defer release()
	return pageErr(storage.ListSchedules(r, tenant, cursor, AnswerBudget))
}

// ScanSchedules calls fn with up to limit schedules of every tenant,
// starting after the key after (nil: the first), from one snapshot of the
// local replica. It returns where the next scan starts: nil once the
// range ended.
func (f *FSM) ScanSchedules(after []byte, limit int, fn func(*pb.Schedule) error) ([]byte, error) {
	r, release, err := f.view()
	if err != nil {
		return nil, err
	}
	defer release()
	return storage.ScanSchedules(r, after, limit, fn)
}
