package main

import (
	"context"
	"fmt"
	"github.com/dockethq/docket/client"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// The verbs of one task's life: enqueue, claim, submit, nack, and task
// to look at it.

func (v *verb) enqueue(ctx context.Context, args []string) error {
	prio := v.fs.Uint("priority", 0, "0..9, higher is claimed first")
	delay := v.fs.Duration("delay", 0, "invisible for this long")
	maxAttempts := v.fs.Uint("max-attempts", 0, fmt.Sprintf("dead-letter after this many failed attempts (0: server default %d)", pb.DefaultMaxAttempts))
	key := v.fs.String("key", "", "idempotency key (default: a fresh random key)")
	taskKey := taskKeyFlag(v.fs)     // fairverbs.go
	setTimeout := timeoutFlags(v.fs) // cancelverbs.go
	after := v.fs.String("after", "", "wait until these tasks (ID[,ID]) completed")
	onFail := v.fs.String("on-parent-failure", "cancel", "when a parent fails, is dead or cancelled: cancel this task, or run it anyway")
	maxPayload := v.fs.Int("max-payload", fsm.DefaultMaxPayload, "refuse a payload above this many bytes before sending it: the cluster's --max-payload (default 1 MiB)")
	pos, err := v.parse(args, 2, 2, "QUEUE PAYLOAD ('-' reads stdin)")
	if err != nil {
		return err
	}
	if err := checkText("queue name", pos[0]); err != nil {
		return err
	}
	payload := []byte(pos[1])
	if pos[1] == "-" {
		// One byte past the limit is enough to refuse.
		if payload, err = io.ReadAll(io.LimitReader(os.Stdin, int64(*maxPayload)+1)); err != nil {
			return fmt.Errorf("read payload: %w", err)
		}
	}
	if err := checkPayload(len(payload), *maxPayload, pos[1] == "-"); err != nil {
		return err
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		nt := &pb.NewTask{Queue: pos[0], Tenant: v.c.tenant, Payload: payload,
			Priority: uint32(*prio), DelayNs: int64(*delay), MaxAttempts: uint32(*maxAttempts), IdempotencyKey: *key}
		setTimeout(nt)
		nt.Key = []byte(*taskKey)
		if err := afterFlags(nt, *after, *onFail); err != nil {
			return err
		}
		items, err := c.Enqueue(ctx, nt)
		if err != nil {
			return err
		}
		return v.print(func(w io.Writer) {
			for _, it := range items {
				fmt.Fprintf(w, "%s %s\n", it.GetTaskId(), strings.TrimPrefix(it.GetState().String(), "TASK_STATE_"))
			}
		}, items[0])
	})
}

func (v *verb) claim(ctx context.Context, args []string) error {
	n := v.fs.Uint("n", pb.DefaultMaxTasks, "claim up to this many tasks")
	lease := v.fs.Duration("lease", pb.DefaultLease, "lease length")
	wait := v.fs.Duration("wait", 0, fmt.Sprintf("wait up to this long for a task (at most %v by default)", pb.MaxWait))
	worker := v.fs.String("worker", "docket-cli", "worker id")
	pos, err := v.parse(args, 1, 1, "QUEUE")
	if err != nil {
		return err
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		tasks, err := c.Claim(ctx, &pb.ClaimRequest{Queue: pos[0], Tenant: v.c.tenant, WorkerId: *worker,
			LeaseNs: int64(*lease), MaxTasks: uint32(*n), WaitNs: int64(*wait)})
		if err != nil {
			return err
		}
		msgs := make([]proto.Message, len(tasks))
		for i, t := range tasks {
			msgs[i] = t
		}
		if len(tasks) == 0 && v.c.json {
			_, err := fmt.Fprintln(v.out, "[]")
			return err
		}
		return v.print(func(w io.Writer) {
			if len(tasks) == 0 {
				fmt.Fprintln(w, "no task")
			}
			for _, t := range tasks {
				fmt.Fprintf(w, "%s fence=%d attempt=%d %spayload=%q\n", t.GetId(), t.GetFence(), t.GetAttempts()+1, keyWord(t), t.GetPayload())
			}
		}, msgs...)
	})
}

func (v *verb) submit(ctx context.Context, args []string) error {
	failed := v.fs.Bool("failed", false, "submit a terminal failure instead of a completion")
	errText := v.fs.String("error", "", "error text, with --failed")
	pos, fence, err := v.parseFenced(args, 3, "ID FENCE [RESULT]")
	if err != nil {
		return err
	}
	req := &pb.SubmitRequest{TaskId: pos[0], Fence: fence, Outcome: pb.Outcome_OUTCOME_COMPLETED, Error: *errText}
	if len(pos) == 3 {
		req.Result = []byte(pos[2])
	}
	if *failed {
		req.Outcome = pb.Outcome_OUTCOME_FAILED
	}
	if flagSet(v.fs, "tenant") {
		req.Tenant = v.c.tenant
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		already, err := c.Submit(ctx, req)
		if err != nil {
			return noTask(err, pos[0])
		}
		return v.print(func(w io.Writer) {
			switch {
			case already:
				fmt.Fprintln(w, "already submitted")
			case *failed:
				fmt.Fprintln(w, "submitted as failed")
			default:
				fmt.Fprintln(w, "submitted")
			}
		}, &pb.SubmitResponse{AlreadyDone: already})
	})
}

func (v *verb) nack(ctx context.Context, args []string) error {
	delay := v.fs.Duration("delay", 0, "retry after this long")
	reason := v.fs.String("reason", "", "why (kept as the task's last error)")
	pos, fence, err := v.parseFenced(args, 2, "ID FENCE")
	if err != nil {
		return err
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		req := &pb.NackRequest{TaskId: pos[0], Fence: fence, DelayNs: int64(*delay), Reason: *reason}
		if flagSet(v.fs, "tenant") {
			req.Tenant = v.c.tenant
		}
		state, err := c.Nack(ctx, req)
		if err != nil {
			return noTask(err, pos[0])
		}
		return v.print(func(w io.Writer) { fmt.Fprintln(w, strings.TrimPrefix(state.String(), "TASK_STATE_")) },
			&pb.NackResponse{State: state})
	})
}

func (v *verb) task(ctx context.Context, args []string) error {
	stale := v.fs.Bool("stale", false, "read any node's local copy instead of a linearizable read")
	uf := v.updateFlags() // retriesverbs.go
	pos, err := v.parse(args, 1, 2, "ID | task update ID [--priority P] [--run-at T|--in D]")
	if err != nil {
		return err
	}
	if pos[0] == "update" && len(pos) == 2 {
		return v.taskUpdate(ctx, pos[1], uf)
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: docket task ID | task update ID", errUsage)
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		read := c.ReadTask
		if *stale {
			read = c.ReadTaskStale
		}
		t, err := read(ctx, pos[0])
		if err != nil {
			return noTask(err, pos[0])
		}
		return v.print(func(w io.Writer) { printTask(w, t) }, t)
	})
}

func printTask(w io.Writer, t *pb.Task) {
	fmt.Fprintf(w, "id:        %s\nqueue:     %s/%s\nstate:     %s\npriority:  %d\n",
		t.GetId(), t.GetQueue(), t.GetTenant(), strings.TrimPrefix(t.GetState().String(), "TASK_STATE_"), t.GetPriority())
	running := t.GetState() == pb.TaskState_TASK_STATE_RUNNING
	// attempts counts claims that ended without a submit: while one runs,
	// the running one is attempt attempts+1.
	if running {
		fmt.Fprintf(w, "attempt:   %d of %d, running\n", t.GetAttempts()+1, t.GetMaxAttempts())
	} else if t.GetClaims() == 0 {
		fmt.Fprintf(w, "attempts:  none yet, %d allowed\n", t.GetMaxAttempts())
	} else {
		fmt.Fprintf(w, "attempts:  %d claimed, %d failed, %d allowed\n", t.GetClaims(), t.GetAttempts(), t.GetMaxAttempts())
	}
	switch {
	case t.GetFence() != 0:
		fmt.Fprintf(w, "fence:     %d\n", t.GetFence())
	case running:
		// The API shows a running claim's fence only to its worker.
		fmt.Fprintf(w, "fence:     (shown only to the worker holding the claim)\n")
	}
	printKey(w, t) // fairverbs.go
	fmt.Fprintf(w, "payload:   %q\n", t.GetPayload())
	printSchedule(w, t)
	printDeps(w, t)
	if len(t.GetProgress()) > 0 {
		fmt.Fprintf(w, "progress:  %q\n", t.GetProgress())
	}
	if len(t.GetResult()) > 0 {
		fmt.Fprintf(w, "result:    %q\n", t.GetResult())
	}
	if t.GetLastError() != "" {
		fmt.Fprintf(w, "error:     %s\n", t.GetLastError())
	}
	printCancel(w, t) // cancelverbs.go
	printAttempts(w, t)
}

// printAttempts lists a task's attempt history, one line each, oldest
// first: claim number, worker, claim and end times, lease expiry, how it
// ended and its error. A fence appears only where the API showed it (an
// ended attempt, to an admin or with auth off).
func printAttempts(w io.Writer, t *pb.Task) {
	h := t.GetHistory()
	if len(h) == 0 {
		return
	}
	if n := len(h); uint32(n) < t.GetClaims() {
		fmt.Fprintf(w, "attempts (the last %d of %d claims):\n", n, t.GetClaims())
	} else {
		fmt.Fprintf(w, "attempts:\n")
	}
	ts := func(ns int64) string {
		if ns == 0 {
			return "-"
		}
		return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
	}
	for _, a := range h {
		out := "RUNNING"
		if a.GetOutcome() != pb.AttemptOutcome_ATTEMPT_OUTCOME_UNSPECIFIED {
			out = strings.TrimPrefix(a.GetOutcome().String(), "ATTEMPT_OUTCOME_")
		}
		fmt.Fprintf(w, "  #%d %s worker=%s claimed=%s lease_until=%s ended=%s", a.GetClaim(), out, a.GetWorkerId(),
			ts(a.GetClaimedAt()), ts(a.GetLeaseUntil()), ts(a.GetEndedAt()))
		if a.GetFence() != 0 && a.GetEndedAt() != 0 {
			fmt.Fprintf(w, " fence=%d", a.GetFence())
		}
		if a.GetError() != "" {
			fmt.Fprintf(w, " error=%q", a.GetError())
		}
		fmt.Fprintln(w)
	}
}
