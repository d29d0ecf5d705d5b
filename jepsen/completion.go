package jepsen

import (
	"context"
	"fmt"
	"time"

	"github.com/dockethq/docket/client"
)

// FEnqueueRetry is a producer's deliberate second Enqueue of a key it
// already saw acknowledged, as a client that lost the first answer
// sends it: Key is the key, Task the id of the answer.
const FEnqueueRetry = "enqueue-retry"

// retryEvery makes every retryEvery-th acknowledged enqueue of a producer
// be sent again (FEnqueueRetry).
const retryEvery = 5

// Minimum counts below which a checker calls a run untested: a run whose
// schedule never fired, whose diamonds never enqueued or whose producers
// never retried proves nothing about slots, dependencies or idempotency.
const (
	MinCronSlots    = 5
	MinDepsChildren = 2
	MinRetries      = 3
)

// CheckCompleted: every acknowledged task ended with a Submit that was
// accepted or of unknown outcome by the end of the drain. A task that a
// nack or an expired lease put back must come round again and be
// completed; one the queue forgot shows here, though a claim once
// delivered it (which is all the lost checker asks). The workload's
// tasks allow 1000 attempts, so none dead-letters.
func CheckCompleted(h *History) Result {
	r := newResult("completed")
	done := map[string]bool{}
	for _, s := range h.ops(FSubmit, "") {
		if s.Type == OK || s.Type == Info {
			done[s.Task] = true
		}
	}
	for _, e := range h.ops(FEnqueue, OK) {
		r.Checked++
		if !done[e.Task] {
			r.violate(e.Task, "acknowledged task never completed: %s key=%s", h.desc(e), e.Key)
		}
	}
	if h.DrainAt == 0 && len(h.Ops) > 0 {
		r.Note = "no drain phase recorded"
	}
	if h.DrainNote != "" {
		r.Note = h.DrainNote + ": unfinished tasks may only be late"
	}
	return r
}

// CheckIdempotentRetry: a second Enqueue of an acknowledged key answers
// the task of the first acknowledgement, never a new one; and the run
// retried at least MinRetries keys.
func CheckIdempotentRetry(h *History) Result {
	r := newResult("idempotent-retry")
	acked := map[string]string{}
	for _, e := range h.ops(FEnqueue, OK) {
		acked[e.Key] = e.Task
	}
	for _, o := range h.ops(FEnqueueRetry, OK) {
		r.Checked++
		if first, ok := acked[o.Key]; ok && first != o.Task {
			r.violate(o.Task, "key %s acknowledged as task %s, and its retry made task %s: %s", o.Key, first, o.Task, h.desc(o))
		}
	}
	atLeast(&r, MinRetries, "retries of an acknowledged key")
	return r
}

// atLeast fails r when it checked fewer than min things: the run did not
// test what r is about.
func atLeast(r *Result, min int, what string) {
	if r.Checked < min {
		r.violate("", "%s", fmt.Sprintf("only %d %s, below the minimum of %d: the run did not test this", r.Checked, what, min))
	}
}

// retryEnqueue sends the Enqueue of an acknowledged key once more, as a
// client that lost the answer does (CheckIdempotentRetry).
func (w *workload) retryEnqueue(ctx context.Context, proc, key string) {
	op := w.rec.Invoke(Event{Proc: proc, F: FEnqueueRetry, Key: key})
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	id, err := w.cl.EnqueueOne(c, Queue, []byte(key), client.TaskIdempotencyKey(key), client.TaskMaxAttempts(1000), client.TaskTenant(Tenant))
	cancel()
	if err == nil {
		w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FEnqueueRetry, Key: key, Task: id})
		return
	}
	typ, cls := classify(err)
	w.rec.Record(Event{Proc: proc, Op: op, Type: typ, F: FEnqueueRetry, Key: key, Err: cls})
}
