package fsm

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// The rule book: testdata/*.txt are scripts of commands, each followed by
// the FSM's answer and every named task whose state the command changed
// (lines starting "~"). They pin the rules as a reader states them, so a
// change to how apply keeps its state (in memory, in Pebble, both) must
// leave every file as it is. The grammar is in testdata/README.md.
// `go test ./fsm -run Test_RuleBook -rewrite` rewrites the expected
// answers from the code; read the diff before committing it.
func Test_RuleBook(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenario files in testdata")
	}
	// At the build's level memory holds the only indexes of pending,
	// running, delayed and finished tasks and of idempotency keys, and
	// small bodies live inside their records; below LevelInlineBodies
	// every body is a key of its own, below LevelExpiryInMemory apply
	// also stores the e/ keys an older build
	// reads, below LevelIdemInMemory the i/ keys, below LevelDelayedInMemory the delayed keys, and below
	// LevelPendingInMemory the running and pending keys too. Every answer
	// must be the same.
	for _, level := range []uint32{FeatureLevel, LevelExpiryInMemory, LevelIdemInMemory, LevelIdemInMemory - 1, LevelDelayedInMemory - 1, LevelPendingInMemory - 1} {
		for _, path := range files {
			name := strings.TrimSuffix(filepath.Base(path), ".txt")
			switch level {
			case LevelExpiryInMemory:
				name += "/split-bodies"
			case LevelIdemInMemory:
				name += "/expiry-index"
			case LevelIdemInMemory - 1:
				name += "/idem-keys"
			case LevelDelayedInMemory - 1:
				name += "/delayed-index"
			case LevelPendingInMemory - 1:
				name += "/pending-index"
			}
			t.Run(name, func(t *testing.T) {
				w := newScenarioAt(t, Options{}, level)
				datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
					w.t = t
					return w.run(d)
				})
			})
		}
	}
}

// Test_RuleBookAcrossReopens runs the rule book with the FSM closed and
// reopened before every directive: whatever apply keeps in memory must
// come back from what it persisted, and every answer must be the same.
func Test_RuleBookAcrossReopens(t *testing.T) {
	if testing.Short() {
		t.Skip("reopens the FSM before every directive")
	}
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			w := newScenario(t, Options{})
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				w.t = t
				if d.Cmd != "reset" {
					w.run(&datadriven.TestData{Cmd: "reopen"})
				}
				return w.run(d)
			})
		})
	}
}

// scenario is the world one file's script runs in: one FSM, a clock the
// script moves, and names for the tasks, tokens and schedules it made.
type scenario struct {
	t      testing.TB
	h      *harness
	now    int64
	ids    map[string]string // task name -> id
	names  map[string]string // task id -> name
	fence  map[string]uint64 // task name -> fence of its last claim
	shown  map[string]string // task name -> its state line as last printed
	opts   Options
	nextID int    // for tasks the script did not name
	level  uint32 // what a reset latches unless it names a level
}

func newScenario(t testing.TB, opts Options) *scenario {
	return newScenarioAt(t, opts, FeatureLevel)
}

// newScenarioAt is newScenario whose resets latch level unless they name
// one.
func newScenarioAt(t testing.TB, opts Options, level uint32) *scenario {
	w := &scenario{t: t, opts: opts, level: level}
	w.reset(level)
	return w
}

// reset starts a fresh FSM at t0 whose cluster latched level.
func (w *scenario) reset(level uint32) {
	w.h = &harness{t: w.t, dir: w.t.TempDir(), opts: w.opts}
	w.h.f = mustOpen(w.t, w.h.dir, w.opts)
	w.now = t0
	w.ids, w.names, w.fence, w.shown = map[string]string{}, map[string]string{}, map[string]uint64{}, map[string]string{}
	w.nextID = 0
	if level > 0 {
		w.h.do(latchCmd(level))
	}
}

func (w *scenario) run(d *datadriven.TestData) string {
	var out []string
	switch d.Cmd {
	case "reset":
		level := w.level
		if v, ok := w.arg(d, "level"); ok {
			level = uint32(w.uint(v))
		}
		w.reset(level)
		return ""
	case "at":
		w.now = t0 + int64(w.dur(d.CmdArgs[0].Key))
		return ""
	case "latch":
		out = w.answer(w.cmd(latchCmd(uint32(w.uint(d.CmdArgs[0].Key)))), nil)
	case "reopen":
		before := mustHash(w.t, w.h.f)
		w.h.reopen()
		if after := mustHash(w.t, w.h.f); after != before {
			w.t.Fatalf("reopen changed the keyspace hash: %s -> %s", before, after)
		}
		return ""
	case "restore":
		snap := mustSnapshot(w.t, w.h.f)
		before := mustHash(w.t, w.h.f)
		fresh := &harness{t: w.t, dir: w.t.TempDir(), opts: w.opts}
		fresh.f = mustOpen(w.t, fresh.dir, w.opts)
		if err := restoreFrom(fresh.f, snap); err != nil {
			w.t.Fatalf("restore: %v", err)
		}
		if after := mustHash(w.t, fresh.f); after != before {
			w.t.Fatalf("restore changed the keyspace hash: %s -> %s", before, after)
		}
		fresh.index = w.h.index
		w.h = fresh
		return ""
	case "enqueue":
		out = w.enqueue(d)
	case "claim":
		out = w.claim(d)
	case "heartbeat":
		var items []*pb.HeartbeatItem
		for _, n := range w.names_(d) {
			it := &pb.HeartbeatItem{TaskId: w.id(n), Fence: w.fenceOf(d, n), Tenant: w.str(d, "tenant")}
			if v, ok := w.arg(d, "lease"); ok {
				it.LeaseNs = int64(w.dur(v))
			}
			if v, ok := w.arg(d, "progress"); ok {
				it.Progress, it.HasProgress = []byte(v), true
			}
			items = append(items, it)
		}
		out = w.answer(w.cmd(heartbeatCmd(w.now, items...)), w.names_(d))
	case "submit", "complete", "fail":
		n := w.name(d)
		outcome := pb.Outcome_OUTCOME_COMPLETED
		if d.Cmd == "fail" {
			outcome = pb.Outcome_OUTCOME_FAILED
		}
		c := submitCmd(w.now, w.id(n), w.fenceOf(d, n), outcome, w.str(d, "result"))
		c.GetSubmit().Error, c.GetSubmit().Tenant = w.str(d, "error"), w.str(d, "tenant")
		out = w.answer(w.cmd(c), []string{n})
	case "nack":
		n := w.name(d)
		c := nackCmd(w.now, w.id(n), w.fenceOf(d, n), w.durArg(d, "delay"), w.str(d, "reason"))
		c.GetNack().Tenant = w.str(d, "tenant")
		out = w.answer(w.cmd(c), []string{n})
	case "snooze":
		n := w.name(d)
		out = w.answer(w.cmd(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_SNOOZE, Now: w.now,
			Body: &pb.Command_Snooze{Snooze: &pb.SnoozeCmd{TaskId: w.id(n), Fence: w.fenceOf(d, n),
				DelayNs: int64(w.durArg(d, "delay")), Tenant: w.str(d, "tenant")}}}), []string{n})
	case "cancel":
		n := w.name(d)
		c := cancelCmd(w.now, w.id(n))
		c.GetCancel().Tenant = w.str(d, "tenant")
		out = w.answer(w.cmd(c), []string{n})
	case "update":
		n := w.name(d)
		u := &pb.UpdateTaskCmd{TaskId: w.id(n), Tenant: w.str(d, "tenant")}
		if v, ok := w.arg(d, "prio"); ok {
			u.HasPriority, u.Priority = true, uint32(w.uint(v))
		}
		if v, ok := w.arg(d, "run-at"); ok {
			u.RunAt = t0 + int64(w.dur(v))
		}
		out = w.answer(w.cmd(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_UPDATE_TASK, Now: w.now,
			Body: &pb.Command_UpdateTask{UpdateTask: u}}), []string{n})
	case "reap", "timeout", "release":
		var items []*pb.ReapItem
		for _, n := range w.names_(d) {
			items = append(items, &pb.ReapItem{TaskId: w.id(n), Fence: w.fenceOf(d, n)})
		}
		var c *pb.Command
		switch d.Cmd {
		case "reap":
			c = reapCmd(w.now, items...)
		case "timeout":
			c = timeOutCmd(w.now, items...)
		default:
			c = &pb.Command{Type: pb.CommandType_COMMAND_TYPE_RELEASE, Now: w.now,
				Body: &pb.Command_Release{Release: &pb.ReleaseCmd{Items: items}}}
		}
		out = w.answer(w.cmd(c), w.names_(d))
	case "promote":
		out = w.answer(w.cmd(promoteCmd(w.now, uint32(w.uintArg(d, "limit", 100)))), nil)
	case "purge":
		out = w.answer(w.cmd(purgeCmd(w.now, uint32(w.uintArg(d, "limit", 100)))), nil)
	case "requeue-dead":
		// By id (the task names its queue) or a whole queue, never both.
		rq := &pb.RequeueDeadCmd{Queue: w.str(d, "q"), Limit: uint32(w.uintArg(d, "limit", 100))}
		var names []string
		if rq.Queue == "" {
			names = []string{w.name(d)}
			rq.TaskId, rq.Limit = w.id(names[0]), 0
		} else {
			rq.Tenant = w.tenant(d)
		}
		out = w.answer(w.cmd(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_REQUEUE_DEAD, Now: w.now,
			Body: &pb.Command_RequeueDead{RequeueDead: rq}}), names)
	case "pause", "resume":
		out = w.answer(w.cmd(setPausedCmd(w.now, w.name(d), w.tenant(d), d.Cmd == "pause")), w.names_(d))
	case "purge-queue":
		out = w.answer(w.cmd(purgeQueueCmd(w.now, w.name(d), w.tenant(d), d.HasArg("dead"), uint32(w.uintArg(d, "limit", 100)))), nil)
	case "retry-policy":
		out = w.answer(w.cmd(w.retryPolicy(d)), w.names_(d))
	case "limits":
		out = w.answer(w.cmd(w.limits(d)), w.names_(d))
	case "key-limit":
		out = w.answer(w.cmd(w.keyLimit(d)), w.names_(d))
	case "keys":
		out = w.keys(d)
	case "schedule":
		out = w.schedule(d)
	case "token":
		out = w.token(d)
	case "stats":
		out = w.stats(d)
	case "tasks":
		return strings.Join(w.states(true), "\n")
	default:
		d.Fatalf(w.t, "unknown directive %q", d.Cmd)
	}
	return strings.Join(append(out, w.states(false)...), "\n")
}

// cmd applies c as the next log entry and returns the answer, whether or
// not the FSM accepted it.
func (w *scenario) cmd(c *pb.Command) *pb.CommandResult {
	w.t.Helper()
	return w.h.apply(c)
}

// answer prints a command's answer: its refusal, or one line per item,
// named by the script's names for the tasks it was about.
func (w *scenario) answer(res *pb.CommandResult, about []string) []string {
	if res.GetErrorCode() != pb.Code_CODE_OK {
		line := "error: " + codeWord(res.GetErrorCode())
		if f := res.GetErrorField(); f != "" {
			line += " field=" + f
		}
		return []string{line + " " + w.named(res.GetErrorDetail())}
	}
	var out []string
	for i, it := range res.GetItems() {
		who := w.names[it.GetTaskId()]
		if who == "" && i < len(about) {
			who = about[i]
		}
		if who == "" {
			who = "item"
		}
		line := who + ": " + codeWord(it.GetCode())
		if it.GetFence() != 0 {
			line += fmt.Sprintf(" fence=%d", it.GetFence())
		}
		if it.GetCancelRequested() {
			line += " cancel-requested"
		}
		if dt := it.GetDetail(); dt != "" {
			line += " (" + w.named(dt) + ")"
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		out = append(out, "ok")
	}
	return out
}

func (w *scenario) enqueue(d *datadriven.TestData) []string {
	names := w.names_(d)
	var tasks []*pb.NewTask
	for _, n := range names {
		task := &pb.NewTask{Queue: w.strOr(d, "q", "q"), Tenant: w.tenant(d), Payload: []byte(n),
			IdempotencyKey: w.str(d, "key"), TimeoutNs: int64(w.durArg(d, "timeout")),
			DelayNs: int64(w.durArg(d, "delay")), RetentionNs: int64(w.durArg(d, "retention")),
			RetryOnTimeout: d.HasArg("retry-on-timeout"), Key: []byte(w.strOr(d, n+".of", w.str(d, "of")))}
		if v, ok := w.arg(d, "size"); ok {
			task.Payload = []byte(strings.Repeat("x", w.uint(v)))
		}
		task.Priority = uint32(w.uintArg(d, "prio", 0))
		task.MaxAttempts = uint32(w.uintArg(d, "attempts", 0))
		if v, ok := w.arg(d, "run-at"); ok {
			task.RunAt = t0 + int64(w.dur(v))
		}
		arg, ok := d.Arg(n + ".after") // one task's own parents
		if !ok {
			arg, ok = d.Arg("after")
		}
		if ok {
			for _, p := range arg.Vals {
				if i, err := strconv.Atoi(p); err == nil {
					task.AfterIndex = append(task.AfterIndex, uint32(i))
				} else {
					task.After = append(task.After, w.id(p))
				}
			}
		}
		switch w.str(d, "on-parent-failure") {
		case "run":
			task.OnParentFailure = pb.ParentFailurePolicy_PARENT_FAILURE_POLICY_RUN
		case "cancel":
			task.OnParentFailure = pb.ParentFailurePolicy_PARENT_FAILURE_POLICY_CANCEL
		}
		if _, ok := d.Arg("backoff"); ok {
			task.Retry = w.retry(d)
		}
		tasks = append(tasks, task)
	}
	c := enqueueCmd(w.now, tasks...)
	if _, ok := d.Arg("max-tasks"); ok {
		StampTenantLimits(c, uint64(w.uintArg(d, "max-tasks", 0)), 0)
	}
	if _, ok := d.Arg("max-bytes"); ok {
		StampTenantLimits(c, 0, uint64(w.uintArg(d, "max-bytes", 0)))
	}
	res := w.cmd(c)
	if res.GetErrorCode() == pb.Code_CODE_OK {
		for i, it := range res.GetItems() {
			if it.GetCode() == pb.Code_CODE_OK && i < len(names) {
				w.ids[names[i]], w.names[it.GetTaskId()] = it.GetTaskId(), names[i]
			}
		}
	}
	return w.answer(res, names)
}

func (w *scenario) claim(d *datadriven.TestData) []string {
	c := claimCmd(w.now, w.strOr(d, "q", "q"), w.tenant(d), w.strOr(d, "worker", "w1"),
		w.durOr(d, "lease", lease), uint32(w.uintArg(d, "n", 1)))
	res := w.cmd(c)
	if res.GetErrorCode() != pb.Code_CODE_OK {
		return w.answer(res, nil)
	}
	var out []string
	for _, task := range res.GetTasks() {
		n := w.nameOf(task.GetId())
		w.fence[n] = task.GetFence()
		line := fmt.Sprintf("%s fence=%d", n, task.GetFence())
		if string(task.GetPayload()) != n && !strings.HasPrefix(string(task.GetPayload()), "xx") {
			line += " payload=" + string(task.GetPayload())
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		out = append(out, "none")
	}
	return out
}

// states prints the state of every named task: all of them, or those
// whose line changed since it was last printed (each prefixed "~", and a
// task purged since is "gone").
func (w *scenario) states(all bool) []string {
	names := make([]string, 0, len(w.ids))
	for n := range w.ids {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		line := w.stateLine(n)
		if all {
			out = append(out, line)
		} else if w.shown[n] != line {
			out = append(out, "~ "+line)
		}
		w.shown[n] = line
	}
	return out
}

// stateLine is one task as the rule book shows it: what a reader of the
// task needs to tell the rules apart, with times relative to t0.
func (w *scenario) stateLine(n string) string {
	task, err := w.h.f.GetTask(w.ids[n])
	if err != nil {
		return n + " gone"
	}
	s := []string{n, strings.ToLower(strings.TrimPrefix(task.GetState().String(), "TASK_STATE_"))}
	add := func(format string, args ...any) { s = append(s, fmt.Sprintf(format, args...)) }
	if task.GetQueue() != "q" {
		add("q=%s", task.GetQueue())
	}
	if task.GetPriority() != 0 {
		add("prio=%d", task.GetPriority())
	}
	if k := task.GetKey(); len(k) > 0 {
		add("of=%s", k)
	}
	if task.GetAttempts() != 0 {
		add("attempts=%d/%d", task.GetAttempts(), task.GetMaxAttempts())
	}
	switch task.GetState() {
	case pb.TaskState_TASK_STATE_RUNNING:
		add("fence=%d lease@%s", task.GetFence(), w.rel(task.GetLeaseUntil()))
		if task.GetDeadlineAt() != 0 {
			add("deadline@%s", w.rel(task.GetDeadlineAt()))
		}
	case pb.TaskState_TASK_STATE_DELAYED:
		add("visible@%s", w.rel(task.GetVisibleAt()))
	case pb.TaskState_TASK_STATE_WAITING:
		add("waiting=%d", task.GetWaiting())
	}
	if task.GetCancelRequested() {
		add("cancel-requested")
	}
	if len(task.GetProgress()) > 0 {
		add("progress=%s", task.GetProgress())
	}
	if r := task.GetResult(); len(r) > 0 {
		add("result=%s", r)
	}
	if e := task.GetLastError(); e != "" {
		add("error=%q", w.named(e))
	}
	if task.GetExpireAt() != 0 {
		add("expires@%s", w.rel(task.GetExpireAt()))
	}
	if h := task.GetHistory(); len(h) > 0 {
		var ends []string
		for _, a := range h {
			end := "running"
			if a.GetOutcome() != pb.AttemptOutcome_ATTEMPT_OUTCOME_UNSPECIFIED {
				end = strings.ToLower(strings.TrimPrefix(a.GetOutcome().String(), "ATTEMPT_OUTCOME_"))
			}
			ends = append(ends, end)
		}
		add("history=%s", strings.Join(ends, ","))
	}
	return strings.Join(s, " ")
}

func (w *scenario) stats(d *datadriven.TestData) []string {
	all, err := w.h.f.Stats(w.name(d), w.tenant(d))
	if err != nil {
		w.t.Fatal(err)
	}
	if len(all) == 0 {
		return []string{"none"}
	}
	s := all[0]
	line := fmt.Sprintf("pending=%d delayed=%d running=%d dead=%d finished=%d waiting=%d",
		s.GetPending(), s.GetDelayed(), s.GetRunning(), s.GetDead(), s.GetCompleted(), s.GetWaiting())
	if s.GetPaused() {
		line += " paused"
	}
	if s.GetMaxRunning() != 0 {
		line += fmt.Sprintf(" max-running=%d", s.GetMaxRunning())
	}
	if s.GetRateMilli() != 0 {
		line += fmt.Sprintf(" rate=%d burst=%d tokens=%d", s.GetRateMilli(), s.GetBurst(), s.GetTokensMilli())
	}
	if s.GetTenantMaxRunning() != 0 {
		line += fmt.Sprintf(" tenant-max-running=%d tenant-running=%d", s.GetTenantMaxRunning(), s.GetTenantRunning())
	}
	if t := s.GetTotals(); t != nil {
		line += fmt.Sprintf("\ntotals enqueued=%d claimed=%d completed=%d failed=%d cancelled=%d dead=%d requeued=%d expired=%d released=%d",
			t.GetEnqueued(), t.GetClaimed(), t.GetCompleted(), t.GetFailed(), t.GetCancelled(), t.GetDeadLettered(),
			t.GetRequeued(), t.GetLeaseExpired(), t.GetReleased())
	}
	return []string{line}
}

// rel is an instant as an offset from t0.
func (w *scenario) rel(at int64) string { return time.Duration(at - t0).String() }

func codeWord(c pb.Code) string {
	return strings.ToLower(strings.TrimPrefix(c.String(), "CODE_"))
}

func (w *scenario) nameOf(id string) string {
	if n, ok := w.names[id]; ok {
		return n
	}
	if id == "" {
		return ""
	}
	// A task the script did not name (a schedule's, a requeued copy):
	// it gets the next free name so that it can be followed.
	w.nextID++
	n := fmt.Sprintf("#%d", w.nextID)
	w.ids[n], w.names[id] = id, n
	return n
}

// named replaces the task ids in a text with the script's names, so
// that an answer reads as the script does.
func (w *scenario) named(text string) string {
	for id, n := range w.names {
		text = strings.ReplaceAll(text, id, n)
	}
	// Instants near t0 (Unix ns) read as offsets from it.
	return instant.ReplaceAllStringFunc(text, func(v string) string {
		ns, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ns < t0-int64(365*24*time.Hour) || ns > t0+int64(365*24*time.Hour) {
			return v
		}
		return "@" + w.rel(ns)
	})
}

var instant = regexp.MustCompile(`\b1[78]\d{17}\b`)
