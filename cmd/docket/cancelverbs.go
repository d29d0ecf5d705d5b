package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/dockethq/docket/client"
	"io"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// cancel is `docket cancel ID`: a pending or delayed task ends CANCELLED
// at once; a running one (feature level 9) is marked cancel-requested, and
// its worker is told at its next heartbeat.
func (v *verb) cancel(ctx context.Context, args []string) error {
	pos, err := v.parse(args, 1, 1, "ID")
	if err != nil {
		return err
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		res, err := c.CancelTask(ctx, pos[0])
		if err != nil {
			return noTask(err, pos[0])
		}
		return v.print(func(w io.Writer) {
			if res.Requested {
				fmt.Fprintf(w, "%s cancel requested: its worker stops at its next heartbeat, then it is CANCELLED\n", pos[0])
				return
			}
			fmt.Fprintf(w, "%s CANCELLED\n", pos[0])
		}, &pb.CancelResponse{CancelRequested: res.Requested, State: res.State})
	})
}

// timeoutFlags adds enqueue's execution-timeout flags to fs; the func it
// returns sets them on a task. The flag is --exec-timeout because every
// verb's --timeout is already the call's own deadline.
func timeoutFlags(fs *flag.FlagSet) func(*pb.NewTask) {
	timeout := fs.Duration("exec-timeout", 0, "end each claim that runs longer than this, even while it heartbeats (0: none; needs feature level 9)")
	retry := fs.Bool("retry-on-timeout", false, "retry a claim that ran past --exec-timeout (an attempt counted) instead of failing the task")
	return func(t *pb.NewTask) {
		t.TimeoutNs, t.RetryOnTimeout = int64(*timeout), *retry
	}
}

// printCancel shows a task's execution timeout and deadline, and a cancel
// request, for `docket task`.
func printCancel(w io.Writer, t *pb.Task) {
	if t.GetTimeoutNs() > 0 {
		retry := ""
		if t.GetRetryOnTimeout() {
			retry = ", retried"
		}
		fmt.Fprintf(w, "timeout:   %v%s\n", time.Duration(t.GetTimeoutNs()), retry)
		if d := t.GetDeadlineAt(); d > 0 {
			fmt.Fprintf(w, "deadline:  %s\n", time.Unix(0, d).UTC().Format(time.RFC3339Nano))
		}
	}
	if t.GetCancelRequested() {
		fmt.Fprintf(w, "cancel:    requested at %s\n", time.Unix(0, t.GetCancelRequestedAt()).UTC().Format(time.RFC3339Nano))
	}
}
