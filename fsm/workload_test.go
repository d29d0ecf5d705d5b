package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// workload writes a random command log from a seed, as a leader with many
// producers and workers would: it drives a reference FSM entry by entry
// and takes the ids and fences of later commands from earlier answers, so
// that most fenced commands are right and some are stale. It also mixes in
// reaps from the leader's own ExpiredLeases scan, promotes, purges,
// requeues, cancels, rejected commands, time that steps backwards, and
// entries that are not commands.
type workload struct {
	rng    *rand.Rand
	now    int64
	index  uint64
	queues []QueueRef
	ids    []string // every task id minted
	claims []claimRef
}

type claimRef struct {
	id    string
	fence uint64
}

func newWorkload(seed uint64) *workload {
	w := &workload{rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), now: t0}
	names := []string{"emails", "reports", "video.encode"}
	if seed%2 == 1 { // sparse: many queues that often run empty
		for i := range 24 {
			names = append(names, fmt.Sprintf("q%d", i))
		}
	}
	for _, q := range names {
		for _, tn := range []string{"acme", "beta"} {
			w.queues = append(w.queues, QueueRef{q, tn})
		}
	}
	return w
}

func (w *workload) pct(p int) bool              { return w.rng.IntN(100) < p }
func (w *workload) dur(max time.Duration) int64 { return w.rng.Int64N(int64(max)) }
func (w *workload) queue() QueueRef             { return w.queues[w.rng.IntN(len(w.queues))] }

// ref picks a claimed task: mostly a recent claim (likely still valid),
// sometimes an old one or a wrong fence.
func (w *workload) ref() claimRef {
	if len(w.claims) == 0 {
		return claimRef{id: TaskID(1, 0), fence: 1}
	}
	i := len(w.claims) - 1 - w.rng.IntN(min(len(w.claims), 8))
	if w.pct(20) {
		i = w.rng.IntN(len(w.claims))
	}
	r := w.claims[i]
	if w.pct(5) {
		r.fence++
	}
	return r
}

func (w *workload) anyID() string {
	if len(w.ids) == 0 || w.pct(5) {
		return TaskID(uint64(w.rng.IntN(100000)), 0) // usually unknown
	}
	return w.ids[w.rng.IntN(len(w.ids))]
}

// bigPayload is 1 to 3 KiB of random bytes: Pebble moves a value that
// large into a blob file (storage/valsep.go), so the replicas' hashes,
// snapshots, restores and crashes cover separated values too.
func (w *workload) bigPayload() []byte {
	b := make([]byte, 1<<10+w.rng.IntN(2<<10))
	for i := range b {
		b[i] = byte(w.rng.Uint32())
	}
	return b
}

func (w *workload) newTask() *pb.NewTask {
	q := w.queue()
	nt := &pb.NewTask{Queue: q.Queue, Tenant: q.Tenant, Priority: uint32(w.rng.IntN(MaxPriority + 1)),
		Payload: []byte(payload[:w.rng.IntN(len(payload))])}
	if w.pct(10) {
		nt.Payload = w.bigPayload()
	}
	switch {
	case w.pct(20):
		nt.DelayNs = w.dur(20 * time.Second)
	case w.pct(5):
		nt.RunAt = w.now + w.dur(40*time.Second) - int64(10*time.Second)
	}
	if w.pct(40) {
		nt.MaxAttempts = uint32(1 + w.rng.IntN(4))
	}
	if w.pct(25) {
		nt.IdempotencyKey = fmt.Sprintf("key-%d", w.rng.IntN(60))
	}
	if w.pct(70) {
		nt.RetentionNs = int64(time.Second) + w.dur(60*time.Second)
	}
	if w.pct(15) {
		nt.Retry = &pb.RetryPolicy{BaseNs: int64(time.Second) + w.dur(3*time.Second), Multiplier: 2, JitterPercent: 25}
	}
	if w.pct(40) {
		nt.Key = []byte(fmt.Sprintf("cust-%d", w.rng.IntN(5))) // level 16: keyed queues order by it
	}
	if w.pct(25) {
		// An execution timeout (level 9; ignored before the latch), some
		// of them retried: TimeOut below ends the claims that pass it.
		nt.TimeoutNs = int64(time.Second) + w.dur(10*time.Second)
		nt.RetryOnTimeout = w.pct(40)
	}
	return nt
}

// next makes the next log entry. f is the reference FSM, which the leader
// scans for expired leases.
func (w *workload) next(t testing.TB, f *FSM) *raft.Log {
	w.index++
	w.now += w.dur(1500 * time.Millisecond)
	now := w.now
	if w.pct(3) {
		now -= w.dur(5 * time.Second) // a command stamped in the past
	}
	if w.pct(3) {
		typ := raft.LogConfiguration
		if w.pct(30) {
			typ = raft.LogNoop
		}
		return &raft.Log{Index: w.index, Term: 1 + w.index/1000, Type: typ, Data: []byte("cfg")}
	}
	if w.pct(1) {
		// The latch rises at random points, so the totals it turns on
		// (LevelCounters) start in the middle of apply batches too.
		c := latchCmd(1 + uint32(w.rng.IntN(int(FeatureLevel))))
		c.Now = now
		return entry(t, w.index, c)
	}
	if w.pct(8) {
		return entry(t, w.index, w.batch(t, f, now))
	}
	if w.pct(3) {
		return entry(t, w.index, w.queueControl(now))
	}
	if w.pct(4) {
		return entry(t, w.index, w.scheduleCmd(f, now))
	}
	if w.pct(4) {
		return entry(t, w.index, w.retries(now))
	}
	if w.pct(2) {
		return entry(t, w.index, w.limits(now))
	}
	return entry(t, w.index, w.command(t, f, now))
}

// batch is what a leader coalescing its callers proposes: a few client
// commands in one entry, some of them stale or invalid.
func (w *workload) batch(t testing.TB, f *FSM, now int64) *pb.Command {
	b := &pb.BatchCmd{}
	for len(b.Commands) < 2+w.rng.IntN(5) {
		if c := w.command(t, f, 0); Batchable(c.GetType()) {
			b.Commands = append(b.Commands, c)
		}
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_BATCH, Now: now, Body: &pb.Command_Batch{Batch: b}}
}

// command makes one command of the mix.
func (w *workload) command(t testing.TB, f *FSM, now int64) *pb.Command {
	var cmd *pb.Command
	switch n := w.rng.IntN(100); {
	case n < 22:
		tasks := make([]*pb.NewTask, 1+w.rng.IntN(6))
		for i := range tasks {
			tasks[i] = w.newTask()
		}
		if w.pct(25) {
			w.addDeps(tasks)
		}
		cmd = enqueueCmd(now, tasks...)
		if w.pct(30) {
			// A leader with tenant limits: tight enough to refuse some.
			StampTenantLimits(cmd, uint64(20+w.rng.IntN(60)), uint64(4000+w.rng.IntN(8000)))
		}
	case n < 42:
		q := w.queue()
		cmd = claimCmd(now, q.Queue, q.Tenant, fmt.Sprintf("w%d", w.rng.IntN(5)),
			time.Second+time.Duration(w.dur(14*time.Second)), uint32(1+w.rng.IntN(3)))
	case n < 52:
		items := make([]*pb.HeartbeatItem, 1+w.rng.IntN(3))
		for i := range items {
			r := w.ref()
			items[i] = &pb.HeartbeatItem{TaskId: r.id, Fence: r.fence}
			if w.pct(50) {
				items[i].Progress, items[i].HasProgress = []byte(fmt.Sprint(w.rng.IntN(100), "%")), true
			}
			if w.pct(30) {
				items[i].LeaseNs = int64(time.Second) + w.dur(20*time.Second)
			}
		}
		cmd = heartbeatCmd(now, items...)
	case n < 64:
		r := w.ref()
		outcome := pb.Outcome_OUTCOME_COMPLETED
		if w.pct(15) {
			outcome = pb.Outcome_OUTCOME_FAILED
		}
		cmd = submitCmd(now, r.id, r.fence, outcome, fmt.Sprint("result ", w.index))
	case n < 72:
		r := w.ref()
		var delay time.Duration
		if w.pct(40) {
			delay = time.Duration(w.dur(10 * time.Second))
		}
		cmd = nackCmd(now, r.id, r.fence, delay, fmt.Sprint("error at ", w.index))
	case n < 77:
		items, err := f.ExpiredLeases(now, 16)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) == 0 || w.pct(20) {
			r := w.ref()
			items = append(items, &pb.ReapItem{TaskId: r.id, Fence: r.fence})
		}
		cmd = reapCmd(now, items...)
	case n < 78:
		// The leader's TimeOut from its own PastDeadlines scan, now and
		// then with a claim whose deadline has not passed or a stale one.
		items, err := f.PastDeadlines(now, 16)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) == 0 || w.pct(20) {
			r := w.ref()
			items = append(items, &pb.ReapItem{TaskId: r.id, Fence: r.fence})
		}
		cmd = timeOutCmd(now, items...)
	case n < 80:
		cmd = promoteCmd(now, uint32(1+w.rng.IntN(50)))
	case n < 83:
		cmd = purgeCmd(now, uint32(1+w.rng.IntN(50)))
	case n < 86:
		if w.pct(50) {
			cmd = requeueDeadCmd(now, w.anyID(), "", "", 0)
		} else {
			q := w.queue()
			cmd = requeueDeadCmd(now, "", q.Queue, q.Tenant, uint32(1+w.rng.IntN(5)))
		}
	case n < 92:
		cmd = cancelCmd(now, w.anyID())
		if w.pct(30) {
			cmd = cancelCmd(now, w.ref().id) // often running: a cancel request from level 9
		}
		if w.pct(30) {
			cmd.GetCancel().Tenant = w.queue().Tenant // sometimes another tenant's: NOT_FOUND
		}
	case n < 95:
		cmd = w.invalid(now)
	case n < 96:
		r := w.ref() // a claim whose answer was lost: mostly still running
		cmd = releaseCmd(now, &pb.ReapItem{TaskId: r.id, Fence: r.fence})
	case n < 97:
		// A Check ends its apply batch (fsm.go); the keyspace must not
		// depend on where batches end.
		cmd = &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CHECK, Now: now, Body: &pb.Command_Check{Check: &pb.CheckCmd{}}}
	case n < 98:
		// Its check index may lie ahead of the entry: rejected the same way
		// on every replica.
		cmd = &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CHECK_RESULT, Now: now, Body: &pb.Command_CheckResult{CheckResult: &pb.CheckResultCmd{
			CheckIndex: 1 + uint64(w.rng.IntN(int(w.index)+2)), Hash: fmt.Sprintf("%064x", w.rng.Uint64()), Agreeing: 2, Voters: 3,
		}}}
	default:
		// Tokens: created (some expiring, some born expired and refused),
		// revoked, sometimes twice; accessors repeat so duplicates occur.
		acc := fmt.Sprintf("acc%d", w.rng.IntN(8))
		if w.pct(60) {
			cmd = createTokenCmd(now, acc, fmt.Sprint("secret", w.rng.IntN(8)), now+w.dur(time.Hour)-int64(time.Minute), w.pct(10))
		} else {
			cmd = revokeTokenCmd(now, acc)
		}
	}
	return cmd
}

// queueControl pauses or resumes a queue (sometimes to the state it has
// already), or purges its waiting tasks or dead letters, a few at a time.
func (w *workload) queueControl(now int64) *pb.Command {
	q := w.queue()
	if w.pct(35) {
		return w.keyRules(now, q)
	}
	if w.pct(60) {
		return setPausedCmd(now, q.Queue, q.Tenant, w.pct(50))
	}
	return purgeQueueCmd(now, q.Queue, q.Tenant, w.pct(40), uint32(1+w.rng.IntN(4)))
}

// retries sets or resets a queue's retry policy and dead retention,
// snoozes a task (mostly under its fence) or changes a task's priority
// or run-at (in any state: the wrong ones are refused).
func (w *workload) retries(now int64) *pb.Command {
	q := w.queue()
	switch w.rng.IntN(5) {
	case 0:
		var p *pb.RetryPolicy
		if w.pct(80) {
			p = &pb.RetryPolicy{BaseNs: int64(time.Second) + w.dur(5*time.Second), Multiplier: uint32(w.rng.IntN(4)),
				JitterPercent: uint32(w.rng.IntN(60))}
			if w.pct(50) {
				p.CapNs = p.BaseNs + w.dur(20*time.Second)
			}
		}
		return setRetryCmd(now, q.Queue, q.Tenant, p)
	case 1:
		if w.pct(30) {
			return resetQueueCmd(now, q.Queue, q.Tenant)
		}
		return setDeadRetentionCmd(now, q.Queue, q.Tenant, time.Duration(w.dur(90*time.Second)))
	case 2, 3:
		r := w.ref()
		return snoozeCmd(now, r.id, r.fence, time.Duration(w.dur(10*time.Second)))
	default:
		prio, runAt := -1, int64(0)
		if w.pct(60) {
			prio = w.rng.IntN(MaxPriority + 1)
		}
		if prio < 0 || w.pct(40) {
			runAt = now + w.dur(30*time.Second) - int64(10*time.Second)
		}
		return updateTaskCmd(now, w.anyID(), prio, runAt)
	}
}

// invalid is a command Validate refuses.
func (w *workload) invalid(now int64) *pb.Command {
	q := w.queue()
	switch w.rng.IntN(6) {
	case 0:
		bad := w.newTask()
		bad.Priority = 10
		return enqueueCmd(now, w.newTask(), bad)
	case 1:
		return claimCmd(now, q.Queue, q.Tenant, "w", 0, 1)
	case 2:
		return submitCmd(now, w.anyID(), 0, pb.Outcome_OUTCOME_COMPLETED, "")
	case 3:
		return nackCmd(now, w.anyID(), 1, -time.Second, "")
	case 4:
		return purgeCmd(-now, 10)
	default:
		return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CANCEL, Now: now}
	}
}

// observe learns ids and fences from the reference FSM's answer.
func (w *workload) observe(out interface{}) {
	res, ok := out.(*pb.CommandResult)
	if !ok || res == nil {
		return
	}
	for _, sub := range res.GetResults() {
		w.observe(sub)
	}
	for _, task := range res.GetTasks() {
		w.claims = append(w.claims, claimRef{task.GetId(), task.GetFence()})
	}
	if len(w.claims) > 256 {
		w.claims = append(w.claims[:0], w.claims[len(w.claims)-128:]...)
	}
	for _, it := range res.GetItems() {
		if it.GetCode() == pb.Code_CODE_OK && it.GetState() != pb.TaskState_TASK_STATE_UNSPECIFIED && len(w.ids) < 20000 {
			w.ids = append(w.ids, it.GetTaskId())
		}
	}
}

// generate writes n entries by driving f one entry at a time. It returns
// the entries and f's answers; hook, when set, runs after each entry.
func generate(t testing.TB, f *FSM, seed uint64, n int, hook func(i int)) ([]*raft.Log, []interface{}) {
	t.Helper()
	w := newWorkload(seed)
	logs := make([]*raft.Log, 0, n)
	results := make([]interface{}, 0, n)
	for i := 0; i < n; i++ {
		l := w.next(t, f)
		out := f.Apply(l)
		w.observe(out)
		logs = append(logs, l)
		results = append(results, out)
		if hook != nil {
			hook(i)
		}
	}
	return logs, results
}

// applyInBatches feeds logs to f in random batch sizes and returns the
// answers in order.
func applyInBatches(f *FSM, logs []*raft.Log, rng *rand.Rand, maxBatch int) []interface{} {
	out := make([]interface{}, 0, len(logs))
	for i := 0; i < len(logs); {
		n := 1 + rng.IntN(maxBatch)
		if rng.IntN(10) == 0 {
			n = 1
		}
		n = min(n, len(logs)-i)
		out = append(out, f.ApplyBatch(logs[i:i+n])...)
		i += n
	}
	return out
}
