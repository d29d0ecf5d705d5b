package leader_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster/leader"
	"github.com/dockethq/docket/cluster/memnode"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata scenarios")

// t0 is the scenarios' epoch.
var t0 = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)

// world runs one scenario: a one-node memnode leader whose clock the
// script moves, and the leader's loops over it.
type world struct {
	t     *testing.T
	node  *memnode.Node
	loops *leader.Loops
	now   atomic.Int64
	ids   map[string]string // task name -> id
	fence map[string]uint64 // task name -> fence of its last claim
}

func newWorld(t *testing.T) *world {
	n, err := memnode.New(t.TempDir(), true, service.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	w := &world{t: t, node: n, ids: map[string]string{}, fence: map[string]uint64{}}
	w.now.Store(t0.UnixNano())
	n.SetClock(func() time.Time { return time.Unix(0, w.now.Load()) })
	w.loops = leader.New(memHost{Service: n.Service(), Node: n}, leader.Config{Log: slog.New(slog.DiscardHandler), ApplyTimeout: 5 * time.Second})
	// The cluster's leader latches the build's level first; fields of a
	// later level (an execution timeout) are dropped before it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.Latch(ctx, fsm.FeatureLevel); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) dur(v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		w.t.Fatal(err)
	}
	return d
}

func (w *world) propose(cmd *pb.Command) *pb.CommandResult {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := w.node.Service().Propose(ctx, cmd)
	if err == nil {
		err = pb.ResultError(res)
	}
	if err != nil {
		w.t.Fatalf("%v: %v", cmd.GetType(), err)
	}
	return res
}

// do runs one command of a scenario.
func (w *world) do(line string) {
	f := strings.Fields(line)
	opts := map[string]string{}
	var args []string
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			opts[k] = v
		} else {
			args = append(args, a)
		}
	}
	switch f[0] {
	case "at": // at <offset from t0>
		w.now.Store(t0.Add(w.dur(args[0])).UnixNano())
	case "enqueue": // enqueue <name> [delay=] [timeout=] [retention=]
		nt := &pb.NewTask{Queue: "q", Payload: []byte(args[0])}
		if v, ok := opts["delay"]; ok {
			nt.DelayNs = int64(w.dur(v))
		}
		if v, ok := opts["timeout"]; ok {
			nt.TimeoutNs = int64(w.dur(v))
		}
		if v, ok := opts["retention"]; ok {
			nt.RetentionNs = int64(w.dur(v))
		}
		res := w.propose(service.EnqueueCommand(&pb.EnqueueRequest{Tasks: []*pb.NewTask{nt}}))
		w.ids[args[0]] = res.GetItems()[0].GetTaskId()
	case "claim": // claim <count> lease=<dur>: the oldest pending tasks
		var n uint32
		fmt.Sscan(args[0], &n)
		res := w.propose(w.node.Service().ClaimCommand(&pb.ClaimRequest{Queue: "q", WorkerId: "w", MaxTasks: n, LeaseNs: int64(w.dur(opts["lease"]))}))
		for _, task := range res.GetTasks() {
			w.fence[string(task.GetPayload())] = task.GetFence()
		}
	case "complete": // complete <name>
		w.propose(service.SubmitCommand(&pb.SubmitRequest{TaskId: w.ids[args[0]], Fence: w.fence[args[0]], Outcome: pb.Outcome_OUTCOME_COMPLETED}))
	case "run": // run <loop>
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.loops.Once(ctx, args[0]); err != nil {
			w.t.Fatalf("run %s: %v", args[0], err)
		}
	default:
		w.t.Fatalf("unknown command %q", line)
	}
}

// states prints each named task's state, by name; a purged task is gone.
func (w *world) states() string {
	names := make([]string, 0, len(w.ids))
	for name := range w.ids {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []string
	for _, name := range names {
		task, err := w.node.FSM().GetTask(w.ids[name])
		state := "gone"
		if err == nil {
			state = strings.ToLower(strings.TrimPrefix(task.GetState().String(), "TASK_STATE_"))
		}
		out = append(out, name+" "+state)
	}
	return strings.Join(out, "\n")
}

// Test_LoopScenarios runs testdata/loops.txt: each block drives a leader
// over a one-node replica with a scripted clock, and prints every task's
// state after its last command.
func Test_LoopScenarios(t *testing.T) {
	const path = "testdata/loops.txt"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(strings.TrimSpace(string(b)), "\n\n")
	var rewritten []string
	for _, blk := range blocks {
		cmds, want, ok := strings.Cut(blk, "\n----\n")
		if !ok {
			rewritten = append(rewritten, blk) // the header
			continue
		}
		lines := strings.Split(cmds, "\n")
		name := strings.TrimPrefix(lines[0], "# ")
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			for _, l := range lines[1:] {
				w.do(l)
			}
			got := w.states()
			if *update {
				want = got
			} else if got != want {
				t.Fatalf("%s: got\n%s\nwant\n%s", path, got, want)
			}
		})
		rewritten = append(rewritten, cmds+"\n----\n"+want)
	}
	if *update {
		if err := os.WriteFile(path, []byte(strings.Join(rewritten, "\n\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// memHost is what the loops see of a MemNode: its Service's group commit
// and bootstrap, the member's FSM, clock and feature level.
type memHost struct {
	*service.Service
	*memnode.Node
}

// Test_PurgeKeepsUpWithMoreThanABatch: one round of the purge removes
// every task whose retention passed, not one Purge's worth. With one
// Purge of 1,000 a round, the default 5 s interval purged at most 200
// tasks a second: a queue that finishes more than that (with 24 h
// retention, a day later) piled up finished tasks without bound.
func Test_PurgeKeepsUpWithMoreThanABatch(t *testing.T) {
	w := newWorld(t)
	const n = 2500
	var ids []string
	for len(ids) < n {
		tasks := make([]*pb.NewTask, 500)
		for i := range tasks {
			tasks[i] = &pb.NewTask{Queue: "q", Payload: []byte("p"), RetentionNs: int64(time.Minute)}
		}
		for _, it := range w.propose(service.EnqueueCommand(&pb.EnqueueRequest{Tasks: tasks})).GetItems() {
			ids = append(ids, it.GetTaskId())
		}
	}
	for done := 0; done < n; {
		res := w.propose(w.node.Service().ClaimCommand(&pb.ClaimRequest{Queue: "q", WorkerId: "w", MaxTasks: 500, LeaseNs: int64(time.Minute)}))
		reqs := make([]*pb.SubmitRequest, 0, len(res.GetTasks()))
		for _, task := range res.GetTasks() {
			reqs = append(reqs, &pb.SubmitRequest{TaskId: task.GetId(), Fence: task.GetFence(), Outcome: pb.Outcome_OUTCOME_COMPLETED})
		}
		cmd, err := service.SubmitBatchCommand(&pb.SubmitBatchRequest{Items: reqs})
		if err != nil {
			t.Fatal(err)
		}
		w.propose(cmd)
		done += len(reqs)
	}
	w.do("at 10m")
	w.do("run purge")
	left := 0
	for _, id := range ids {
		if _, err := w.node.FSM().GetTask(id); err == nil {
			left++
		}
	}
	if left != 0 {
		t.Fatalf("one round of the purge left %d of %d expired tasks", left, n)
	}
	// Each purged completed task left a dependency tombstone that expires
	// a retention later. A round's Purges come back with no task once only
	// tombstones are due, and one round must still take them all.
	if _, expired, err := w.node.FSM().HasDue(w.now.Load()); err != nil || expired {
		t.Fatalf("right after the purge: expired %v, %v; want nothing due", expired, err)
	}
	w.do("at 20m")
	if _, expired, err := w.node.FSM().HasDue(w.now.Load()); err != nil || !expired {
		t.Fatalf("a retention later: expired %v, %v; want the tombstones due", expired, err)
	}
	w.do("run purge")
	if _, expired, err := w.node.FSM().HasDue(w.now.Load()); err != nil || expired {
		t.Fatalf("one round of the purge left expired tombstones (%v, %v)", expired, err)
	}
}
