package fsm

import (
	"fmt"

	"github.com/dockethq/docket/fsm/cronspec"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// cronBounds are the limits of a schedule's spec.
var cronBounds = cronspec.Bounds{MaxLen: MaxSpecLen, MaxEvery: MaxDelay, MaxTime: MaxTime}

// ParseCronSpec parses a schedule's spec in its zone within the FSM's
// bounds (cronspec.Parse).
func ParseCronSpec(spec, zone string) (cronspec.Spec, error) {
	return cronspec.Parse(spec, zone, cronBounds)
}

// DueSlots is what the leader fires for s at now, under its missed-slot
// policy: the newest due slot (SKIP), or the newest catchup_max due slots,
// oldest first (CATCH_UP). Due slots are those after both last_slot and
// updated_at, up to now. The FSM checks every slot again; this choice is
// the leader's alone.
func DueSlots(s *pb.Schedule, now int64) ([]int64, error) {
	c, err := ParseCronSpec(s.GetSpec(), s.GetZone())
	if err != nil {
		return nil, fmt.Errorf("schedule %s/%s: %w", s.GetTenant(), s.GetName(), err)
	}
	return c.Newest(scheduleFloor(s), now, catchUp(s)), nil
}

// scheduleFloor is the time at or before which no slot of s fires.
func scheduleFloor(s *pb.Schedule) int64 { return max(s.GetLastSlot(), s.GetUpdatedAt()) }

// catchUp is how many due slots one round fires.
func catchUp(s *pb.Schedule) int {
	if s.GetMissed() != pb.MissedPolicy_MISSED_POLICY_CATCH_UP {
		return 1
	}
	return max(1, int(s.GetCatchupMax()))
}
