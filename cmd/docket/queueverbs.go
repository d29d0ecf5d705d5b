package main

import (
	"context"
	"fmt"
	"github.com/dockethq/docket/client"
	"io"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// queue is `docket queue pause|resume|purge|retry|reset|limit QUEUE` and
// `docket queue dead-retention QUEUE D`: queue control on one queue of
// --tenant (the default tenant unless given).
func (v *verb) queue(ctx context.Context, args []string) error {
	rf := v.retryFlags() // retriesverbs.go
	lf := v.limitFlags() // queuelimitsverbs.go
	const what = "pause|resume|purge|retry|reset|limit QUEUE | queue dead-retention QUEUE D"
	pos, err := v.parse(args, 1, 3, what)
	if err != nil {
		return err
	}
	if pos[0] == "limit" {
		return v.queueLimit(ctx, pos[1:], lf)
	}
	if lf.any() {
		return fmt.Errorf("%w: docket queue %s", errUsage, what)
	}
	if sub := pos[0]; (sub == "retry" || sub == "dead-retention" || sub == "reset") && len(pos) >= 2 {
		return v.queueRetries(ctx, pos, rf)
	}
	sub, queue := pos[0], pos[1]
	if (sub != "pause" && sub != "resume" && sub != "purge") || len(pos) != 2 {
		return fmt.Errorf("%w: docket queue %s", errUsage, what)
	}
	if sub == "purge" {
		return v.purge(ctx, queue, false)
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		var changed bool
		if sub == "pause" {
			changed, err = c.PauseQueue(ctx, queue, v.c.tenant)
		} else {
			changed, err = c.ResumeQueue(ctx, queue, v.c.tenant)
		}
		if err != nil {
			return err
		}
		state := map[string]string{"pause": "paused", "resume": "resumed"}[sub]
		return v.print(func(w io.Writer) {
			if changed {
				fmt.Fprintf(w, "%s/%s %s\n", queue, v.c.tenant, state)
			} else {
				fmt.Fprintf(w, "%s/%s was %s already\n", queue, v.c.tenant, map[string]string{"pause": "paused", "resume": "not paused"}[sub])
			}
		}, &pb.PauseQueueResponse{Changed: changed})
	})
}

// purge deletes a queue's waiting tasks (dead: its dead letters).
func (v *verb) purge(ctx context.Context, queue string, dead bool) error {
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		purge := c.PurgeQueued
		if dead {
			purge = c.PurgeDead
		}
		n, err := purge(ctx, queue, v.c.tenant)
		if err != nil {
			return err
		}
		what := "pending and delayed tasks"
		if dead {
			what = "dead letters"
		}
		return v.print(func(w io.Writer) { fmt.Fprintf(w, "purged %d %s of %s/%s\n", n, what, queue, v.c.tenant) },
			&pb.PurgeQueueResponse{Purged: n})
	})
}

// queues is `docket queues`: every queue the caller may see, across
// tenants unless --tenant names one, with its counts and pause.
func (v *verb) queues(ctx context.Context, args []string) error {
	if _, err := v.parse(args, 0, 0, ""); err != nil {
		return err
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		all, err := c.Queues(ctx)
		if err != nil {
			return err
		}
		if flagSet(v.fs, "tenant") {
			mine := all[:0]
			for _, s := range all {
				if s.GetTenant() == v.c.tenant {
					mine = append(mine, s)
				}
			}
			all = mine
		}
		return v.print(func(w io.Writer) { queueTable(w, all, false) }, &pb.StatsResponse{Queues: all})
	})
}

// wait is `docket wait ID`: wait, up to --timeout, for a task to finish,
// then show it. Past the timeout it fails.
func (v *verb) wait(ctx context.Context, args []string) error {
	pos, err := v.parse(args, 1, 1, "ID  (waits up to --timeout)")
	if err != nil {
		return err
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		t, err := c.WaitResult(ctx, pos[0])
		if err != nil {
			if ctx.Err() != nil {
				// The deadline cut the long poll: gRPC's words for it are a
				// stream reset, which says nothing to a person.
				return &failure{code: exitTimeout, err: ctx.Err(), msg: fmt.Sprintf(
					"task %s did not finish within --timeout %v (docket task %s shows where it is; a longer --timeout waits longer)",
					pos[0], v.c.timeout, pos[0])}
			}
			return noTask(err, pos[0])
		}
		return v.print(func(w io.Writer) { printTask(w, t) }, t)
	})
}

func (v *verb) stats(ctx context.Context, args []string) error {
	pos, err := v.parse(args, 0, 1, "[QUEUE]")
	if err != nil {
		return err
	}
	queue := ""
	if len(pos) == 1 {
		queue = pos[0]
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		tenant := v.c.tenant
		if tenant == pb.DefaultTenant && !flagSet(v.fs, "tenant") {
			tenant = "" // every tenant unless asked
		}
		stats, err := c.Stats(ctx, queue, tenant)
		if err != nil {
			return err
		}
		return v.print(func(w io.Writer) { queueTable(w, stats, true) }, &pb.StatsResponse{Queues: stats})
	})
}

// queueTable prints one line per queue: its counts by state, whether it
// is paused, and its limits; withOldest adds the age of its oldest pending
// task, which stats shows and queues leaves out.
func queueTable(w io.Writer, stats []*pb.QueueStats, withOldest bool) {
	head := fmt.Sprintf("%-20s %-12s %-7s %8s %8s %8s %8s %8s %9s ", "QUEUE", "TENANT", "STATE", "PENDING", "DELAYED",
		"WAITING", "RUNNING", "DEAD", "FINISHED")
	if withOldest {
		head += fmt.Sprintf("%-10s ", "OLDEST")
	}
	fmt.Fprintln(w, head+"LIMITS")
	for _, s := range stats {
		state := "active"
		if s.GetPaused() {
			state = "paused"
		}
		line := fmt.Sprintf("%-20s %-12s %-7s %8d %8d %8d %8d %8d %9d ", s.GetQueue(), s.GetTenant(), state, s.GetPending(),
			s.GetDelayed(), s.GetWaiting(), s.GetRunning(), s.GetDead(), s.GetCompleted())
		if withOldest {
			oldest := "-"
			if s.GetOldestPendingAt() > 0 {
				oldest = time.Since(time.Unix(0, s.GetOldestPendingAt())).Round(time.Second).String()
			}
			line += fmt.Sprintf("%-10s ", oldest)
		}
		limits := limitsText(s)
		if limits == "" {
			limits = "-"
		}
		fmt.Fprintln(w, line+limits)
	}
}
