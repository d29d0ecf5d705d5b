package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// schedule is `docket schedule add|list|remove`: recurring tasks of
// --tenant (the default tenant unless given).
func (v *verb) schedule(ctx context.Context, args []string) error {
	queue := v.fs.String("queue", "", "add: the queue each slot's task goes to")
	spec := v.fs.String("cron", "", "add: 5-field cron spec or @hourly, @daily, @every 30s, ...")
	zone := v.fs.String("tz", "", "add: IANA time zone of the cron fields (default UTC)")
	payload := v.fs.String("payload", "", "add: payload of each task ('-' reads stdin)")
	prio := v.fs.Uint("priority", 0, "add: 0..9, higher is claimed first")
	maxAttempts := v.fs.Uint("max-attempts", 0, fmt.Sprintf("add: dead-letter after this many failed attempts (0: server default %d)", pb.DefaultMaxAttempts))
	retention := v.fs.Duration("retention", 0, "add: keep each finished task this long (0: server default)")
	missed := v.fs.String("missed", "skip", "add: slots missed while no leader could fire them: skip (fire only the newest) or catchup")
	catchupMax := v.fs.Uint("catchup-max", 0, "add, with --missed catchup: fire at most this many missed slots at once, the newest (0: 1)")
	taskKey := v.fs.String("task-key", "", "add: the key of each slot's task, for a fair queue (at most 256 bytes)")
	const what = "add NAME --queue Q --cron SPEC | list | remove NAME"
	pos, err := v.parse(args, 1, 2, what)
	if err != nil {
		return err
	}
	sub := pos[0]
	wantPos := map[string]int{"add": 2, "list": 1, "remove": 2}[sub]
	if wantPos == 0 || len(pos) != wantPos {
		return fmt.Errorf("%w: docket schedule %s", errUsage, what)
	}
	var s *pb.Schedule
	if sub == "add" {
		if *queue == "" || *spec == "" {
			return fmt.Errorf("%w: docket schedule add NAME needs --queue and --cron", errUsage)
		}
		body := []byte(*payload)
		if *payload == "-" {
			if body, err = io.ReadAll(os.Stdin); err != nil {
				return fmt.Errorf("read payload: %w", err)
			}
		}
		s = &pb.Schedule{Name: pos[1], Tenant: v.c.tenant, Queue: *queue, Spec: *spec, Zone: *zone, Payload: body,
			Priority: uint32(*prio), MaxAttempts: uint32(*maxAttempts), RetentionNs: int64(*retention)}
		if *taskKey != "" {
			s.Key = []byte(*taskKey)
		}
		switch *missed {
		case "skip":
			s.Missed = pb.MissedPolicy_MISSED_POLICY_SKIP
		case "catchup", "catch-up":
			s.Missed, s.CatchupMax = pb.MissedPolicy_MISSED_POLICY_CATCH_UP, uint32(*catchupMax)
		default:
			return fmt.Errorf("%w: --missed is skip or catchup, not %q", errUsage, *missed)
		}
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		switch sub {
		case "add":
			stored, created, err := c.PutSchedule(ctx, s)
			if err != nil {
				return err
			}
			verb := "added"
			if !created {
				verb = "replaced"
			}
			return v.print(func(w io.Writer) {
				fmt.Fprintf(w, "schedule %s/%s %s: %q in %s -> queue %s\n", stored.GetTenant(), stored.GetName(), verb,
					stored.GetSpec(), zoneName(stored.GetZone()), stored.GetQueue())
			}, &pb.PutScheduleResponse{Created: created, Schedule: stored})
		case "remove":
			removed, err := c.RemoveSchedule(ctx, v.c.tenant, pos[1])
			if err != nil {
				return err
			}
			if !removed {
				if v.c.json {
					if err := v.print(nil, &pb.RemoveScheduleResponse{}); err != nil {
						return err
					}
				}
				return &failure{code: exitNotFound, msg: fmt.Sprintf("not found: schedule %s/%s (docket schedule list shows them)", v.c.tenant, pos[1]), err: client.ErrNotFound}
			}
			return v.print(func(w io.Writer) { fmt.Fprintf(w, "schedule %s/%s removed\n", v.c.tenant, pos[1]) },
				&pb.RemoveScheduleResponse{Removed: removed})
		}
		all, err := c.ListSchedules(ctx, v.c.tenant)
		if err != nil {
			return err
		}
		return v.print(func(w io.Writer) {
			now := time.Now().UnixNano()
			fmt.Fprintf(w, "%-20s %-16s %-18s %-14s %-10s %7s  %-20s  %s\n", "NAME", "QUEUE", "SPEC", "ZONE", "MISSED", "FIRED", "LAST SLOT", "NEXT RUN")
			for _, s := range all {
				fmt.Fprintf(w, "%-20s %-16s %-18s %-14s %-10s %7d  %-20s  %s\n", s.GetName(), s.GetQueue(), s.GetSpec(),
					zoneName(s.GetZone()), missedName(s), s.GetFired(), slotText(s.GetLastSlot()), nextRun(s, now))
			}
		}, &pb.ListSchedulesResponse{Schedules: all})
	})
}

// nextRun is a schedule's next slot after now, as the FSM computes slots
// (fsm.ParseCronSpec: the same zone database and @every rule), with how
// far away it is.
func nextRun(s *pb.Schedule, now int64) string {
	spec, err := fsm.ParseCronSpec(s.GetSpec(), s.GetZone())
	if err != nil {
		return "-"
	}
	next := spec.Next(now)
	if next <= 0 {
		return "-"
	}
	return fmt.Sprintf("%s (in %v)", slotText(next), time.Duration(next-now).Round(time.Second))
}

func zoneName(z string) string {
	if z == "" {
		return "UTC"
	}
	return z
}

func missedName(s *pb.Schedule) string {
	if s.GetMissed() == pb.MissedPolicy_MISSED_POLICY_CATCH_UP {
		return fmt.Sprintf("catchup:%d", max(1, s.GetCatchupMax()))
	}
	return "skip"
}

// slotText is a slot as people read it: RFC 3339 in UTC, "-" for none.
func slotText(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339)
}

// printSchedule is the line `docket task` shows for a task a schedule
// enqueued.
func printSchedule(w io.Writer, t *pb.Task) {
	if t.GetSchedule() != "" {
		fmt.Fprintf(w, "schedule:  %s (slot %s)\n", t.GetSchedule(), strings.TrimSpace(slotText(t.GetScheduleSlot())))
	}
}
