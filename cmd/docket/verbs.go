package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// defaultAddrs is the `docket dev` cluster, so the README tour needs no flags.
const defaultAddrs = "127.0.0.1:7401,127.0.0.1:7402,127.0.0.1:7403"

type common struct {
	addr    string
	json    bool
	timeout time.Duration
	tenant  string
	token   string
	tls     tlsFiles
}

func commonFlags(fs *flag.FlagSet) *common {
	c := &common{}
	fs.StringVar(&c.addr, "addr", envOr("DOCKET_ADDR", defaultAddrs), "comma-separated node addresses (env DOCKET_ADDR)")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "give up after this long")
	fs.StringVar(&c.tenant, "tenant", pb.DefaultTenant, "tenant")
	fs.StringVar(&c.token, "token", "", "bearer token for a cluster with --auth (env "+envToken+", which keeps it out of ps)")
	c.tls.flags(fs)
	return c
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// verb is one operator command after flag parsing.
type verb struct {
	fs  *flag.FlagSet
	c   *common
	out io.Writer
}

// verbs maps each operator verb to its method.
var verbs = map[string]func(*verb, context.Context, []string) error{
	"enqueue":  (*verb).enqueue,
	"claim":    (*verb).claim,
	"submit":   (*verb).submit,
	"nack":     (*verb).nack,
	"task":     (*verb).task,
	"stats":    (*verb).stats,
	"dlq":      (*verb).dlq,
	"cluster":  (*verb).cluster,
	"token":    (*verb).token,
	"snapshot": (*verb).snapshot,
	"queue":    (*verb).queue,
	"queues":   (*verb).queues,
	"cancel":   (*verb).cancel,
	"wait":     (*verb).wait,
	"schedule": (*verb).schedule,
	"snooze":   (*verb).snooze,
	"tasks":    (*verb).tasks,
	"dag":      (*verb).dag,
}

func runVerb(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	v := &verb{fs: fs, c: commonFlags(fs), out: stdout}
	setUsage(fs, name, stderr) // verbhelp.go
	if fn, ok := verbs[name]; ok {
		return fn(v, ctx, args)
	}
	return fmt.Errorf("%w: unknown verb %q", errUsage, name)
}

// parse parses flags that may follow positional arguments, and checks
// the count of positionals.
func (v *verb) parse(args []string, minPos, maxPos int, what string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(v.fs, args); err != nil {
			return nil, err
		}
		args = v.fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < minPos || len(pos) > maxPos {
		return nil, fmt.Errorf("%w: docket %s %s", errUsage, v.fs.Name(), what)
	}
	return pos, nil
}

func (v *verb) connect(ctx context.Context) (*client.Client, context.Context, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, v.c.timeout)
	addrs := splitList(v.c.addr)
	// A CA that cannot be read is client.WithTLS's to report.
	if cfg := probeTLS(v.c.tls); cfg != nil || v.c.tls.ca == "" {
		if err := probe(ctx, addrs, cfg, v.c.tls); err != nil {
			cancel()
			return nil, nil, nil, err
		}
	}
	opts := v.c.tls.options()
	if tok := v.c.token; tok != "" || os.Getenv(envToken) != "" {
		if tok == "" {
			tok = os.Getenv(envToken)
		}
		opts = append(opts, client.WithToken(tok))
	}
	if flagSet(v.fs, "tenant") {
		// Only when asked: with auth off, a tenant on a task id is checked.
		opts = append(opts, client.WithRequestTenant(v.c.tenant))
	}
	c, err := client.New(ctx, addrs, opts...)
	if err != nil {
		cancel()
		return nil, nil, nil, fmt.Errorf("connect %s: %w", v.c.addr, err)
	}
	return c, ctx, func() { _ = c.Close(); cancel() }, nil
}

// print writes msgs as JSON (one object, or an array) or via the text func.
func (v *verb) print(text func(io.Writer), msgs ...proto.Message) error {
	if !v.c.json {
		text(v.out)
		return nil
	}
	parts := make([]string, 0, len(msgs))
	for _, m := range msgs {
		b, err := protojson.Marshal(m)
		if err != nil {
			return fmt.Errorf("json: %w", err)
		}
		parts = append(parts, string(b))
	}
	if len(parts) == 1 {
		_, err := fmt.Fprintln(v.out, parts[0])
		return err
	}
	_, err := fmt.Fprintf(v.out, "[%s]\n", strings.Join(parts, ","))
	return err
}

func (v *verb) enqueue(ctx context.Context, args []string) error {
	prio := v.fs.Uint("priority", 0, "0..9, higher is claimed first")
	delay := v.fs.Duration("delay", 0, "invisible for this long")
	maxAttempts := v.fs.Uint("max-attempts", 0, fmt.Sprintf("dead-letter after this many failed attempts (0: server default %d)", pb.DefaultMaxAttempts))
	key := v.fs.String("key", "", "idempotency key (default: a fresh random key)")
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
	c, ctx, done, err := v.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	nt := &pb.NewTask{Queue: pos[0], Tenant: v.c.tenant, Payload: payload,
		Priority: uint32(*prio), DelayNs: int64(*delay), MaxAttempts: uint32(*maxAttempts), IdempotencyKey: *key}
	setTimeout(nt)
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
	c, ctx, done, err := v.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
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
			fmt.Fprintf(w, "%s fence=%d attempt=%d payload=%q\n", t.GetId(), t.GetFence(), t.GetAttempts()+1, t.GetPayload())
		}
	}, msgs...)
}

// parseFenced parses the arguments of a verb on a claimed task: ID FENCE
// and up to maxPos-2 more. A fence that is not a number is a usage error,
// found before anything is dialled.
func (v *verb) parseFenced(args []string, maxPos int, what string) (pos []string, fence uint64, err error) {
	if pos, err = v.parse(args, 2, maxPos, what); err != nil {
		return nil, 0, err
	}
	if fence, err = strconv.ParseUint(pos[1], 10, 64); err != nil {
		return nil, 0, fmt.Errorf("%w: fence %q is not a number", errUsage, pos[1])
	}
	return pos, fence, nil
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
	c, ctx, done, err := v.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
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
}

func (v *verb) nack(ctx context.Context, args []string) error {
	delay := v.fs.Duration("delay", 0, "retry after this long")
	reason := v.fs.String("reason", "", "why (kept as the task's last error)")
	pos, fence, err := v.parseFenced(args, 2, "ID FENCE")
	if err != nil {
		return err
	}
	c, ctx, done, err := v.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
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
	c, ctx, done, err := v.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	read := c.ReadTask
	if *stale {
		read = c.ReadTaskStale
	}
	t, err := read(ctx, pos[0])
	if err != nil {
		return noTask(err, pos[0])
	}
	return v.print(func(w io.Writer) { printTask(w, t) }, t)
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

func (v *verb) stats(ctx context.Context, args []string) error {
	pos, err := v.parse(args, 0, 1, "[QUEUE]")
	if err != nil {
		return err
	}
	queue := ""
	if len(pos) == 1 {
		queue = pos[0]
	}
	c, ctx, done, err := v.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	tenant := v.c.tenant
	if tenant == pb.DefaultTenant && !flagSet(v.fs, "tenant") {
		tenant = "" // every tenant unless asked
	}
	stats, err := c.Stats(ctx, queue, tenant)
	if err != nil {
		return err
	}
	return v.print(func(w io.Writer) {
		fmt.Fprintf(w, "%-20s %-12s %-7s %8s %8s %8s %8s %8s %9s %-10s %s\n", "QUEUE", "TENANT", "STATE", "PENDING", "DELAYED",
			"WAITING", "RUNNING", "DEAD", "FINISHED", "OLDEST", "LIMITS")
		for _, s := range stats {
			oldest := "-"
			if s.GetOldestPendingAt() > 0 {
				oldest = time.Since(time.Unix(0, s.GetOldestPendingAt())).Round(time.Second).String()
			}
			state := "active"
			if s.GetPaused() {
				state = "paused"
			}
			limits := limitsText(s)
			if limits == "" {
				limits = "-"
			}
			fmt.Fprintf(w, "%-20s %-12s %-7s %8d %8d %8d %8d %8d %9d %-10s %s\n", s.GetQueue(), s.GetTenant(), state, s.GetPending(),
				s.GetDelayed(), s.GetWaiting(), s.GetRunning(), s.GetDead(), s.GetCompleted(), oldest, limits)
		}
	}, &pb.StatsResponse{Queues: stats})
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func (v *verb) dlq(ctx context.Context, args []string) error {
	limit := v.fs.Uint("limit", pb.DefaultListLimit, "at most this many tasks")
	id := v.fs.String("id", "", "requeue one task by id")
	cursor := v.fs.String("cursor", "", "continue a list after this cursor")
	const what = "list [QUEUE] | dlq requeue QUEUE | dlq requeue --id ID | dlq purge QUEUE"
	pos, err := v.parse(args, 1, 2, what)
	if err != nil {
		return err
	}
	sub, pos := pos[0], pos[1:]
	if sub == "purge" && len(pos) == 1 {
		return v.purge(ctx, pos[0], true)
	}
	if (sub != "list" && sub != "requeue") || (len(pos) == 0 && sub == "requeue" && *id == "") {
		return fmt.Errorf("%w: docket dlq %s", errUsage, what)
	}
	c, ctx, done, err := v.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	if sub == "list" {
		queue := "" // every queue of the tenant
		if len(pos) > 0 {
			queue = pos[0]
		}
		res, err := c.ListDead(ctx, &pb.ListDeadRequest{Queue: queue, Tenant: v.c.tenant, Cursor: *cursor, Limit: uint32(*limit)})
		if err != nil {
			return err
		}
		return v.print(func(w io.Writer) {
			fmt.Fprintf(w, "%-20s %-16s %8s %-32s %s\n", "ID", "QUEUE", "ATTEMPTS", "ERROR", "PAYLOAD")
			for _, t := range res.GetTasks() {
				fmt.Fprintf(w, "%-20s %-16s %8s %-32s %s\n", t.GetId(), t.GetQueue(), fmt.Sprintf("%d/%d", t.GetAttempts(), t.GetMaxAttempts()),
					cell(t.GetLastError(), 32), cell(string(t.GetPayload()), payloadWidth))
			}
			if res.GetNextCursor() != "" {
				fmt.Fprintf(w, "more: --cursor %q\n", res.GetNextCursor())
			}
		}, res)
	}
	req := &pb.RequeueDeadRequest{TaskId: *id, Limit: uint32(*limit)}
	if *id == "" {
		req.Queue, req.Tenant = pos[0], v.c.tenant
	}
	items, err := c.RequeueDead(ctx, req)
	if err != nil {
		return err
	}
	if *id != "" && len(items) == 1 {
		// One task asked for: its item's code is the answer.
		if err := client.ItemError(items[0]); err != nil {
			return noTask(err, *id)
		}
	}
	return v.print(func(w io.Writer) {
		for _, it := range items {
			fmt.Fprintf(w, "%s %s\n", it.GetTaskId(), strings.TrimPrefix(it.GetCode().String(), "CODE_"))
		}
	}, &pb.RequeueDeadResponse{Items: items})
}

func (v *verb) cluster(ctx context.Context, args []string) error {
	const what = "status | cluster transfer [ID] | cluster remove ID | cluster leave"
	pos, err := v.parse(args, 1, 2, what)
	if err != nil {
		return err
	}
	sub, pos := pos[0], pos[1:]
	if (sub != "status" && sub != "transfer" && sub != "remove" && sub != "leave") || ((sub == "status" || sub == "leave") && len(pos) > 0) || (sub == "remove" && len(pos) != 1) {
		return fmt.Errorf("%w: docket cluster %s", errUsage, what)
	}
	c, ctx, done, err := v.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	if sub == "leave" {
		// The node that leaves is the one named first in --addr.
		addr := splitList(v.c.addr)[0]
		if err := c.Leave(ctx, addr); err != nil {
			return err
		}
		return v.print(func(w io.Writer) { fmt.Fprintf(w, "%s left the cluster and stops\n", addr) }, &pb.LeaveResponse{})
	}
	if sub == "remove" {
		// RemoveServer of an id outside the configuration changes nothing
		// and answers OK: say so rather than "removed".
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(st.GetServers(), func(s *pb.Server) bool { return s.GetId() == pos[0] }) {
			return &failure{code: exitNotFound, msg: fmt.Sprintf("not found: server %s is not in the cluster's configuration (docket cluster status lists them)", pos[0]), err: client.ErrNotFound}
		}
		if err := c.RemoveServer(ctx, pos[0]); err != nil {
			return err
		}
		return v.print(func(w io.Writer) { fmt.Fprintf(w, "removed %s\n", pos[0]) }, &pb.RemoveServerResponse{})
	}
	if sub == "transfer" {
		to := ""
		if len(pos) == 1 {
			to = pos[0]
		}
		leader, err := c.TransferLeadership(ctx, to)
		if err != nil {
			return err
		}
		return v.print(func(w io.Writer) { fmt.Fprintf(w, "leader is now %s\n", leader) },
			&pb.TransferLeadershipResponse{LeaderId: leader})
	}
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	return v.print(func(w io.Writer) {
		fmt.Fprintf(w, "leader: %s at %s  term %d  commit %d\n", st.GetLeaderId(), st.GetLeaderGrpcAddr(), st.GetTerm(), st.GetCommitIndex())
		for _, s := range st.GetServers() {
			mark := " "
			if s.GetLeader() {
				mark = "*"
			}
			fmt.Fprintf(w, " %s %-6s grpc %-16s raft %-16s %-8s %-7s level %d  %s\n", mark, s.GetId(), s.GetGrpcAddr(), s.GetRaftAddr(),
				s.GetSuffrage(), s.GetHealth(), s.GetFeatureLevel(), s.GetVersion())
		}
		fmt.Fprintf(w, "failure tolerance: %d more may fail before the quorum is lost (%s's gossip view)\n", st.GetFailureTolerance(), st.GetNodeId())
		fmt.Fprintf(w, "features: cluster enabled level %d; %s's build applies up to %d\n",
			st.GetEnabledFeatureLevel(), st.GetNodeId(), st.GetFeatureLevel())
		if id := st.GetClusterId(); id != "" {
			fmt.Fprintf(w, "cluster id: %s (a node refuses peers of another)\n", id)
		}
		if cs := st.GetConsistency(); cs != nil {
			fmt.Fprintf(w, "consistency (%s): %s  last check at %d  majority %.12s  own %.12s\n",
				st.GetNodeId(), cs.GetStatus(), cs.GetIndex(), cs.GetMajorityHash(), cs.GetOwnHash())
			if cs.GetDetail() != "" {
				fmt.Fprintf(w, "  %s\n", cs.GetDetail())
			}
		}
	}, st)
}
