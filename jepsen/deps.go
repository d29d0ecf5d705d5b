package jepsen

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/proto/docketv1"
)

// FDeps is an ok event with no invocation that records a task's parents
// once its enqueue was acknowledged: Task is the child, Detail its
// parents' ids, comma-separated.
const FDeps = "deps"

// dagEvery makes every dagEvery-th enqueue of a producer a small DAG.
const dagEvery = 10

// enqueueDAG enqueues a diamond of three tasks in one Enqueue: a, then b
// after a, then c after a and b. Each task is recorded as an enqueue of
// its own key, so the lost and unexpected checkers see it like any other;
// FDeps events tell the order checker who waits on whom. A cluster that
// has not latched dependencies (during a rolling upgrade) refuses the
// call before proposing it: recorded fail, and the producer goes on.
func (w *workload) enqueueDAG(ctx context.Context, proc string, n int) {
	keys := make([]string, 3)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%d%c", proc, n, 'a'+i)
	}
	for attempt := 0; attempt < 4 && ctx.Err() == nil; attempt++ {
		ops := make([]int64, len(keys))
		for i, k := range keys {
			ops[i] = w.rec.Invoke(Event{Proc: proc, F: FEnqueue, Key: k})
		}
		tasks := make([]*docketv1.NewTask, len(keys))
		for i, k := range keys {
			tasks[i] = &docketv1.NewTask{Queue: Queue, Tenant: Tenant, Payload: []byte(k), IdempotencyKey: k, MaxAttempts: 1000}
		}
		tasks[1].AfterIndex = []uint32{0}
		tasks[2].AfterIndex = []uint32{0, 1}
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		items, err := w.cl.Enqueue(c, tasks...)
		cancel()
		for i := 0; err == nil && i < len(items); i++ {
			err = client.ItemError(items[i])
		}
		if err == nil {
			ids := make([]string, len(items))
			for i, it := range items {
				ids[i] = it.GetTaskId()
				w.rec.Record(Event{Proc: proc, Op: ops[i], Type: OK, F: FEnqueue, Key: keys[i], Task: ids[i]})
			}
			w.rec.Record(Event{Proc: proc, Type: OK, F: FDeps, Task: ids[1], Detail: ids[0]})
			w.rec.Record(Event{Proc: proc, Type: OK, F: FDeps, Task: ids[2], Detail: ids[0] + "," + ids[1]})
			w.knownMu.Lock()
			w.known = append(w.known, ids...)
			w.knownMu.Unlock()
			return
		}
		typ, cls := classify(err)
		if errors.Is(err, client.ErrFeatureDisabled) {
			typ = Fail // the gate refuses before proposing anything
		}
		for i, k := range keys {
			w.rec.Record(Event{Proc: proc, Op: ops[i], Type: typ, F: FEnqueue, Key: k, Err: cls})
		}
		if typ == Fail {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CheckDepsOrder: no task is claimed before every parent completed. A
// claim of a child is a violation unless each parent has a Submit that
// was invoked before the claim's answer: a completion the FSM could only
// apply after the child was handed out would mean the child ran early.
// Submits of unknown outcome count, since they may have applied.
func CheckDepsOrder(h *History) Result {
	r := newResult("dependencies")
	submits := map[string][]Op{}
	for _, s := range h.ops(FSubmit, "") {
		if s.Type != Fail {
			submits[s.Task] = append(submits[s.Task], s)
		}
	}
	for _, c := range h.ops(FClaim, OK) {
		parents := h.Deps[c.Task]
		if c.Task == "" || len(parents) == 0 {
			continue
		}
		r.Checked++
		for _, p := range parents {
			ok := false
			for _, s := range submits[p] {
				ok = ok || s.Invoke < c.Complete
			}
			if !ok {
				r.violate(c.Task, "claimed before its parent %s completed: %s", p, h.desc(c))
			}
		}
	}
	atLeast(&r, MinDepsChildren, "claims of a task with parents")
	return r
}

// parseDeps reads an FDeps event into h.
func (h *History) parseDeps(e Event) {
	if h.Deps == nil {
		h.Deps = map[string][]string{}
	}
	h.Deps[e.Task] = strings.Split(e.Detail, ",")
}
