package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// The scheduler: the leader's loop that fires recurring tasks. Each round
// it reads every schedule from its own replica, asks fsm.DueSlots which
// slots are due at its clock under the schedule's missed-slot policy, and
// proposes one FireSchedule per slot. It decides nothing the FSM trusts:
// the FSM refuses a slot fired before (by this leader or a deposed one
// whose entry committed late), not yet due or off the spec, so a round
// repeated, raced or run by two leaders in turn enqueues a slot once.

const (
	// schedulePage is how many schedules one read of the keyspace takes.
	schedulePage = 1000
	// fireParallel bounds the FIRE commands in flight in one round. Slots
	// of one schedule go one after another, oldest first: a newer slot
	// applied first would make the older ALREADY_DONE, a lost catch-up.
	fireParallel = 16
	// maxFiresPerRound bounds one round's work; what is left is due in the
	// next round still.
	maxFiresPerRound = 4096
)

// fire is the due slots of one schedule, oldest first.
type fire struct {
	tenant, name string
	slots        []int64
}

// ScheduleOnce is one round of the scheduler. It does nothing until the
// cluster latched LevelSchedules: before that no schedule can exist, and
// a FIRE would stop a server of an older build.
func (l *Loops) ScheduleOnce(ctx context.Context) error {
	if l.h.EnabledLevel() < fsm.LevelSchedules {
		return nil
	}
	now := l.h.Now().UnixNano()
	var due []fire
	total := 0
	var after []byte
	for total < maxFiresPerRound {
		var err error
		after, err = l.h.FSM().ScanSchedules(after, schedulePage, func(s *pb.Schedule) error {
			slots, err := fsm.DueSlots(s, now)
			if err != nil {
				// Put by this build's Validate, so not expected; one bad
				// record must not stop the others.
				l.log.Warn("schedule skipped", "tenant", s.GetTenant(), "schedule", s.GetName(), "err", err)
				return nil
			}
			if len(slots) > 0 && total < maxFiresPerRound {
				due = append(due, fire{s.GetTenant(), s.GetName(), slots})
				total += len(slots)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("scheduler: read schedules: %w", err)
		}
		if after == nil {
			break
		}
	}
	if len(due) == 0 {
		return nil
	}
	sem := make(chan struct{}, fireParallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, f := range due {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := l.fireSlots(ctx, f); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// fireSlots proposes the slots of one schedule, oldest first, and stops at
// the first that fails to commit: a later one would skip it for good.
func (l *Loops) fireSlots(ctx context.Context, f fire) error {
	for _, slot := range f.slots {
		res, err := l.propose(ctx, service.FireScheduleCommand(f.tenant, f.name, slot))
		if err != nil {
			return fmt.Errorf("fire %s/%s slot %d: %w", f.tenant, f.name, slot, err)
		}
		it := res.GetItems()
		if len(it) != 1 {
			return fmt.Errorf("fire %s/%s slot %d: %d items", f.tenant, f.name, slot, len(it))
		}
		switch it[0].GetCode() {
		case pb.Code_CODE_OK:
			l.log.Debug("schedule fired", "tenant", f.tenant, "schedule", f.name, "slot", slot, "task", it[0].GetTaskId())
		case pb.Code_CODE_ALREADY_DONE, pb.Code_CODE_NOT_FOUND:
			// Fired by an earlier leader, or removed since the read.
		default:
			l.log.Warn("schedule slot refused", "tenant", f.tenant, "schedule", f.name, "slot", slot,
				"code", it[0].GetCode(), "detail", it[0].GetDetail())
			return nil
		}
	}
	return nil
}
