package main

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dockethq/docket/client"
	"io"
	"os"
	"strings"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// dagFile is the JSON of `docket dag enqueue`: tasks with local names,
// each after other tasks of the file (by name) or existing tasks (by id).
// The file's order does not matter; it is sorted so that parents come
// first, and a cycle is refused before anything is sent.
type dagFile struct {
	Queue string    `json:"queue"` // the default queue of its tasks
	Tasks []dagTask `json:"tasks"`
}

type dagTask struct {
	Name            string   `json:"name"`
	Queue           string   `json:"queue"`
	Payload         string   `json:"payload"`
	Priority        uint32   `json:"priority"`
	Delay           string   `json:"delay"` // a Go duration: "90s"
	MaxAttempts     uint32   `json:"max_attempts"`
	Key             string   `json:"key"`               // the idempotency key
	TaskKey         string   `json:"task_key"`          // the task's key (fair queues)
	After           []string `json:"after"`             // names in the file, or task ids
	OnParentFailure string   `json:"on_parent_failure"` // cancel (default) or run
}

// dagEnqueued is one line of the answer: the task's name and what the
// cluster said.
type dagEnqueued struct {
	Name   string `json:"name"`
	ID     string `json:"id"`
	State  string `json:"state"`
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// dag is `docket dag enqueue FILE.json`: a whole graph in one Enqueue, so
// that it is stored all at once or (for an unknown parent, a bad field)
// not at all.
func (v *verb) dag(ctx context.Context, args []string) error {
	const what = "enqueue FILE.json ('-' reads stdin)"
	pos, err := v.parse(args, 2, 2, what)
	if err != nil {
		return err
	}
	if pos[0] != "enqueue" {
		return fmt.Errorf("%w: docket dag %s", errUsage, what)
	}
	var raw []byte
	if pos[1] == "-" {
		raw, err = io.ReadAll(os.Stdin)
	} else {
		raw, err = os.ReadFile(pos[1])
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", pos[1], err)
	}
	var f dagFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return fmt.Errorf("%w: %s: %v", errUsage, pos[1], err)
	}
	if len(f.Tasks) > pb.MaxBatch {
		// The whole graph goes in one Enqueue, which the cluster bounds.
		return fmt.Errorf("%w: %s holds %d tasks; a DAG is enqueued in one call of at most %d tasks", errUsage, pos[1], len(f.Tasks), pb.MaxBatch)
	}
	names, tasks, err := dagTasks(f, v.c.tenant)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errUsage, pos[1], err)
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		items, err := c.Enqueue(ctx, tasks...)
		if err != nil {
			return err
		}
		out := make([]dagEnqueued, len(items))
		for i, it := range items {
			out[i] = dagEnqueued{Name: names[i], ID: it.GetTaskId(), State: strings.TrimPrefix(it.GetState().String(), "TASK_STATE_")}
			if it.GetCode() != pb.Code_CODE_OK {
				out[i].Code, out[i].Detail = strings.TrimPrefix(it.GetCode().String(), "CODE_"), it.GetDetail()
			}
		}
		if v.c.json {
			b, err := json.Marshal(map[string]any{"tasks": out})
			if err != nil {
				return fmt.Errorf("json: %w", err)
			}
			_, err = fmt.Fprintln(v.out, string(b))
			return err
		}
		for _, e := range out {
			fmt.Fprintf(v.out, "%-16s %s %s", e.Name, e.ID, e.State)
			if e.Code != "" {
				fmt.Fprintf(v.out, " %s: %s", e.Code, e.Detail)
			}
			fmt.Fprintln(v.out)
		}
		return nil
	})
}

// dagTasks orders a file's tasks parents first (stable: the file's order
// where it is free) and turns names into after_index. It returns the
// names in the order sent.
func dagTasks(f dagFile, tenant string) ([]string, []*pb.NewTask, error) {
	if len(f.Tasks) == 0 {
		return nil, nil, errors.New("no tasks")
	}
	at := map[string]int{}
	for i, t := range f.Tasks {
		if t.Name == "" {
			return nil, nil, fmt.Errorf("task %d has no name", i)
		}
		if _, dup := at[t.Name]; dup {
			return nil, nil, fmt.Errorf("two tasks are named %q", t.Name)
		}
		at[t.Name] = i
	}
	order, placed, err := dagOrder(f.Tasks, at)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, len(order))
	tasks := make([]*pb.NewTask, len(order))
	for p, i := range order {
		t := f.Tasks[i]
		nt := &pb.NewTask{Queue: t.Queue, Tenant: tenant, Payload: []byte(t.Payload), Priority: t.Priority,
			MaxAttempts: t.MaxAttempts, IdempotencyKey: t.Key, Key: []byte(t.TaskKey)}
		if nt.Queue == "" {
			nt.Queue = f.Queue
		}
		if t.Delay != "" {
			d, err := time.ParseDuration(t.Delay)
			if err != nil {
				return nil, nil, fmt.Errorf("task %q: delay: %v", t.Name, err)
			}
			nt.DelayNs = int64(d)
		}
		for _, a := range t.After {
			if j, local := at[a]; local {
				nt.AfterIndex = append(nt.AfterIndex, uint32(placed[j]))
			} else {
				nt.After = append(nt.After, a)
			}
		}
		var err error
		if nt.OnParentFailure, err = parentPolicy(t.OnParentFailure); err != nil {
			return nil, nil, fmt.Errorf("task %q: %v", t.Name, err)
		}
		names[p], tasks[p] = t.Name, nt
	}
	return names, tasks, nil
}

// dagOrder is Kahn's algorithm, always taking the earliest ready task of
// the file: a min-heap of ready file indexes, so O((tasks + edges) log
// tasks). (Rescanning the file for the next ready task made a 100,000-task
// file cost minutes: BenchmarkDagOrder.) It returns the file indexes in
// the order sent, and each file index's position in it.
func dagOrder(tasks []dagTask, at map[string]int) (order, placed []int, err error) {
	n := len(tasks)
	waiting := make([]int, n)    // local parents not placed yet
	children := make([][]int, n) // file index -> its local children
	for i, t := range tasks {
		for _, a := range t.After {
			if j, local := at[a]; local {
				waiting[i]++
				children[j] = append(children[j], i)
			}
		}
	}
	ready := &intHeap{}
	for i := range tasks {
		if waiting[i] == 0 {
			heap.Push(ready, i)
		}
	}
	placed = make([]int, n) // file index -> position sent, -1 until placed
	for i := range placed {
		placed[i] = -1
	}
	order = make([]int, 0, n)
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		placed[i] = len(order)
		order = append(order, i)
		for _, c := range children[i] {
			if waiting[c]--; waiting[c] == 0 {
				heap.Push(ready, c)
			}
		}
	}
	if len(order) < n {
		var left []string
		for i, t := range tasks {
			if placed[i] < 0 {
				left = append(left, t.Name)
			}
		}
		return nil, nil, fmt.Errorf("the tasks %s wait on each other in a cycle", strings.Join(left, ", "))
	}
	return order, placed, nil
}

// intHeap is a min-heap of ints for container/heap.
type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// parentPolicy reads --on-parent-failure: cancel (or empty) or run.
func parentPolicy(s string) (pb.ParentFailurePolicy, error) {
	switch s {
	case "", "cancel":
		return pb.ParentFailurePolicy_PARENT_FAILURE_POLICY_UNSPECIFIED, nil
	case "run":
		return pb.ParentFailurePolicy_PARENT_FAILURE_POLICY_RUN, nil
	}
	return 0, fmt.Errorf("on_parent_failure %q: want cancel or run", s)
}

// afterFlags fills a task's parents from `docket enqueue --after ID[,ID]
// --on-parent-failure cancel|run`.
func afterFlags(nt *pb.NewTask, after, policy string) error {
	for _, id := range strings.Split(after, ",") {
		if id = strings.TrimSpace(id); id != "" {
			nt.After = append(nt.After, id)
		}
	}
	p, err := parentPolicy(policy)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	nt.OnParentFailure = p
	return nil
}

// printDeps adds a task's parents to `docket task`.
func printDeps(w io.Writer, t *pb.Task) {
	if len(t.GetParents()) == 0 {
		return
	}
	policy := "cancel"
	if t.GetOnParentFailure() == pb.ParentFailurePolicy_PARENT_FAILURE_POLICY_RUN {
		policy = "run"
	}
	fmt.Fprintf(w, "parents:   %s (waiting on %d; if one fails: %s)\n", strings.Join(t.GetParents(), ","), t.GetWaiting(), policy)
}
