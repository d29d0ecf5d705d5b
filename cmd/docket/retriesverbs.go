package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dockethq/docket/client"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// retryFlagSet holds the flags of `docket queue retry`, registered by
// the queue verb before it parses.
type retryFlagSet struct {
	base, maxDelay *time.Duration
	mult, jitter   *uint
}

func (v *verb) retryFlags() retryFlagSet {
	return retryFlagSet{
		base:     v.fs.Duration("base", 0, "retry: the first retry's delay (0 clears the policy)"),
		maxDelay: v.fs.Duration("cap", 0, "retry: the longest delay (0: no cap below a year)"),
		mult:     v.fs.Uint("multiplier", 2, "retry: each retry waits this many times longer"),
		jitter:   v.fs.Uint("jitter", 20, "retry: shorten each delay by up to this percent, per task"),
	}
}

// queueRetries is `docket queue retry|dead-retention|reset QUEUE`: a
// queue's retry policy, how long its dead letters are kept, or back to
// the defaults (which also resumes a paused queue). pos is the parsed
// positionals, the subcommand first.
func (v *verb) queueRetries(ctx context.Context, pos []string, rf retryFlagSet) error {
	const what = "retry QUEUE --base D [--cap D] | queue dead-retention QUEUE DURATION | queue reset QUEUE"
	base, maxDelay, mult, jitter := rf.base, rf.maxDelay, rf.mult, rf.jitter
	sub, queue := pos[0], pos[1]
	if (sub == "dead-retention") != (len(pos) == 3) {
		return fmt.Errorf("%w: docket queue %s", errUsage, what)
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		var changed bool
		var said string
		var err error
		switch sub {
		case "reset":
			changed, err = c.ResetQueue(ctx, queue, v.c.tenant)
			said = "reset to the defaults"
		case "dead-retention":
			var keep time.Duration
			if keep, err = time.ParseDuration(pos[2]); err != nil {
				return fmt.Errorf("%w: dead-retention %q: %v", errUsage, pos[2], err)
			}
			changed, err = c.SetQueueRetry(ctx, &pb.SetQueueRetryRequest{Queue: queue, Tenant: v.c.tenant,
				HasDeadRetention: true, DeadRetentionNs: int64(keep)})
			said = fmt.Sprintf("keeps dead letters for %v", keep)
			if keep == 0 {
				said = fmt.Sprintf("keeps dead letters for %v (the default)", pb.DefaultDeadRetention)
			}
		default:
			p := &pb.RetryPolicy{BaseNs: int64(*base), CapNs: int64(*maxDelay), Multiplier: uint32(*mult), JitterPercent: uint32(*jitter)}
			changed, err = c.SetQueueRetry(ctx, &pb.SetQueueRetryRequest{Queue: queue, Tenant: v.c.tenant, HasRetry: true, Retry: p})
			capText := "no cap"
			if *maxDelay > 0 {
				capText = fmt.Sprintf("capped at %v", *maxDelay)
			}
			said = fmt.Sprintf("retries after %v, x%d, %s, jitter %d%%", *base, *mult, capText, *jitter)
			if *base == 0 {
				said = "retries at once (no policy)"
			}
		}
		if err != nil {
			return err
		}
		return v.print(func(w io.Writer) {
			if !changed {
				said += " already"
			}
			fmt.Fprintf(w, "%s/%s %s\n", queue, v.c.tenant, said)
		}, &pb.SetQueueRetryResponse{Changed: changed})
	})
}

// snooze is `docket snooze ID FENCE --for D`: hand a claimed task back
// for later without using an attempt.
func (v *verb) snooze(ctx context.Context, args []string) error {
	delay := v.fs.Duration("for", 0, "claimable again after this long (0: at once)")
	pos, fence, err := v.parseFenced(args, 2, "ID FENCE [--for D]")
	if err != nil {
		return err
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		state, err := c.Snooze(ctx, pos[0], fence, *delay)
		if err != nil {
			return noTask(err, pos[0])
		}
		return v.print(func(w io.Writer) { fmt.Fprintln(w, strings.TrimPrefix(state.String(), "TASK_STATE_")) },
			&pb.SnoozeResponse{State: state})
	})
}

// updateFlagSet holds the flags of `docket task update`, registered by
// the task verb before it parses.
type updateFlagSet struct {
	prio  *uint
	runAt *string
	in    *time.Duration
}

func (v *verb) updateFlags() updateFlagSet {
	return updateFlagSet{
		prio:  v.fs.Uint("priority", 0, "update: the new priority, 0..9"),
		runAt: v.fs.String("run-at", "", "update: claimable from this time (RFC 3339)"),
		in:    v.fs.Duration("in", 0, "update: claimable after this long from now"),
	}
}

// taskUpdate is `docket task update ID [--priority P] [--run-at T | --in D]`:
// change a pending or delayed task.
func (v *verb) taskUpdate(ctx context.Context, id string, uf updateFlagSet) error {
	prio, runAt, in := uf.prio, uf.runAt, uf.in
	var err error
	var u client.TaskUpdate
	if flagSet(v.fs, "priority") {
		p := uint32(*prio)
		u.Priority = &p
	}
	switch {
	case *runAt != "" && flagSet(v.fs, "in"):
		return fmt.Errorf("%w: give --run-at or --in, not both", errUsage)
	case *runAt != "":
		if u.RunAt, err = time.Parse(time.RFC3339, *runAt); err != nil {
			return fmt.Errorf("%w: --run-at: %v", errUsage, err)
		}
	case flagSet(v.fs, "in"):
		u.RunAt = time.Now().Add(*in)
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		state, err := c.UpdateTask(ctx, id, u)
		if err != nil {
			return noTask(err, id)
		}
		return v.print(func(w io.Writer) {
			fmt.Fprintf(w, "%s %s\n", id, strings.TrimPrefix(state.String(), "TASK_STATE_"))
		},
			&pb.UpdateTaskResponse{State: state})
	})
}

// tasks is `docket tasks QUEUE --state S`: page through a queue's tasks
// in one state of --tenant.
func (v *verb) tasks(ctx context.Context, args []string) error {
	state := v.fs.String("state", "pending", "pending, delayed, running or dead")
	limit := v.fs.Uint("limit", pb.DefaultListLimit, "at most this many tasks")
	cursor := v.fs.String("cursor", "", "continue a list after this cursor")
	pos, err := v.parse(args, 1, 1, "QUEUE [--state S] [--limit N] [--cursor C]")
	if err != nil {
		return err
	}
	st, ok := pb.TaskState_value["TASK_STATE_"+strings.ToUpper(*state)]
	if !ok {
		return fmt.Errorf("%w: --state %q: pending, delayed, running or dead", errUsage, *state)
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		res, err := c.ListTasks(ctx, &pb.ListTasksRequest{Queue: pos[0], Tenant: v.c.tenant, State: pb.TaskState(st),
			Cursor: *cursor, Limit: uint32(*limit)})
		if err != nil {
			return err
		}
		return v.print(func(w io.Writer) {
			// A running task's time that matters is its lease's end.
			when, at := "VISIBLE AT", (*pb.Task).GetVisibleAt
			if pb.TaskState(st) == pb.TaskState_TASK_STATE_RUNNING {
				when, at = "LEASE UNTIL", (*pb.Task).GetLeaseUntil
			}
			keyCol := keyColumnOf(res.GetTasks()) // fairverbs.go: only when a task has a key
			fmt.Fprintf(w, "%-20s %4s %8s %-20s %s%s\n", "ID", "PRIO", "FAILED", when, keyCol.head(), "PAYLOAD")
			for _, t := range res.GetTasks() {
				fmt.Fprintf(w, "%-20s %4d %8s %-20s %s%s\n", t.GetId(), t.GetPriority(), fmt.Sprintf("%d/%d", t.GetAttempts(), t.GetMaxAttempts()),
					slotText(at(t)), keyCol.cell(t), cell(string(t.GetPayload()), payloadWidth))
			}
			if res.GetNextCursor() != "" {
				fmt.Fprintf(w, "more: --cursor %q\n", res.GetNextCursor())
			}
		}, res)
	})
}
