package jepsen

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// taskState is the per-task model: a task exists once enqueued, each claim
// grants a larger fence and the lease (held), and one Submit under the
// current fence completes it. Reaps are not observed by clients, so the
// model lets a stale answer come at any time except for a repeat of the
// winning Submit, which must answer "already done".
type taskState struct {
	exists    bool
	fence     uint64
	held      bool
	done      bool
	doneFence uint64
}

type modelIn struct {
	f     string
	fence uint64
}

type modelOut struct {
	typ   string // ok, fail, info
	fence uint64 // granted by a claim
	done  bool   // already_done on a Submit
	err   string
}

func modelStep(st, in, out any) []any {
	s, i, o := st.(taskState), in.(modelIn), out.(modelOut)
	if o.typ == Fail && i.f != FHeartbeat && i.f != FSubmit && i.f != FNack {
		return []any{s} // definite failure: no effect
	}
	switch i.f {
	case FEnqueue:
		n := s
		n.exists = true
		if o.typ == Info && !s.exists {
			return []any{s, n}
		}
		if o.typ == OK {
			return []any{n}
		}
		return []any{s}
	case FClaim:
		if o.typ == Info {
			return []any{s} // claims without an answer carry no task id
		}
		if !s.exists || s.done || o.fence <= s.fence {
			return nil
		}
		return []any{taskState{exists: true, fence: o.fence, held: true}}
	case FHeartbeat:
		switch o.typ {
		case OK:
			if s.done || !s.held || i.fence != s.fence {
				return nil
			}
			return []any{s}
		case Fail:
			if i.fence == s.fence && !s.done {
				s.held = false // reaped, as far as this client can tell
			}
		}
		return []any{s}
	case FSubmit:
		won := s
		won.done, won.doneFence, won.held = true, i.fence, false
		switch o.typ {
		case OK:
			if o.done {
				// "Already done": an earlier Submit under this fence won,
				// possibly this call's own first attempt (the client
				// retries a Submit whose outcome it did not learn).
				if s.done && s.doneFence == i.fence {
					return []any{s}
				}
				if !s.done && s.held && i.fence == s.fence {
					return []any{won}
				}
				return nil
			}
			if s.done || !s.held || i.fence != s.fence {
				return nil
			}
			return []any{won}
		case Fail:
			if s.done && s.doneFence == i.fence && o.err == ErrStale {
				return nil // a repeat of the winning Submit must say "already done"
			}
			if i.fence == s.fence && !s.done {
				s.held = false
			}
			return []any{s}
		default:
			if !s.done && s.held && i.fence == s.fence {
				return []any{s, won}
			}
			return []any{s}
		}
	case FNack:
		rel := s
		rel.held = false
		switch o.typ {
		case OK:
			if s.done || !s.held || i.fence != s.fence {
				return nil
			}
			return []any{rel}
		case Info:
			if !s.done && s.held && i.fence == s.fence {
				return []any{s, rel}
			}
		}
		return []any{s}
	}
	return []any{s}
}

// TaskModel is the porcupine model of one task's lifecycle.
var TaskModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{taskState{}} },
	Step: modelStep,
	DescribeOperation: func(in, out any) string {
		i, o := in.(modelIn), out.(modelOut)
		return fmt.Sprintf("%s(%d) -> %s fence=%d done=%v %s", i.f, i.fence, o.typ, o.fence, o.done, o.err)
	},
	DescribeState: func(st any) string { return fmt.Sprintf("%+v", st.(taskState)) },
}

// TaskOperations splits the history into porcupine operations per task.
// Enqueues are attributed through their idempotency key (acknowledged ones
// by the id they returned, unknown ones by the task a claim delivered).
func TaskOperations(h *History) map[string][]porcupine.Operation {
	keyTask := map[string]string{}
	for _, o := range h.Ops {
		if (o.F == FEnqueue || o.F == FClaim) && o.Type == OK && o.Task != "" {
			keyTask[o.Key] = o.Task
		}
	}
	procs := map[string]int{}
	out := map[string][]porcupine.Operation{}
	for _, o := range h.Ops {
		task := o.Task
		switch o.F {
		case FEnqueue:
			task = keyTask[o.Key]
		case FClaim:
			if o.Type != OK || task == "" {
				continue
			}
		case FHeartbeat, FSubmit, FNack:
		default:
			continue
		}
		if task == "" {
			continue
		}
		if _, ok := procs[o.Proc]; !ok {
			procs[o.Proc] = len(procs)
		}
		out[task] = append(out[task], porcupine.Operation{
			ClientId: procs[o.Proc],
			Input:    modelIn{f: o.F, fence: o.Fence},
			Call:     o.Invoke,
			Output:   modelOut{typ: o.Type, fence: o.Fence, done: o.Done, err: o.Err},
			Return:   o.Complete,
		})
	}
	return out
}

// CheckLinearizable checks every task's operations against TaskModel with
// porcupine, within budget overall.
func CheckLinearizable(h *History, budget time.Duration) Result {
	r := newResult("linearizable-per-task")
	model := TaskModel.ToModel()
	byTask := TaskOperations(h)
	tasks := make([]string, 0, len(byTask))
	for t := range byTask {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	deadline := time.Now().Add(budget)
	unknown := 0
	for _, t := range tasks {
		left := time.Until(deadline)
		if left <= 0 {
			unknown += len(tasks) - r.Checked
			break
		}
		r.Checked++
		switch porcupine.CheckOperationsTimeout(model, byTask[t], min(left, 5*time.Second)) {
		case porcupine.Illegal:
			r.violate(t, "task %s: no linearization of its %d operations fits the model", t, len(byTask[t]))
		case porcupine.Unknown:
			unknown++
		}
	}
	if unknown > 0 {
		r.Note = fmt.Sprintf("%d tasks not decided within %s", unknown, budget)
		if r.Verdict == Pass {
			r.Verdict = Unknown
		}
	}
	return r
}
