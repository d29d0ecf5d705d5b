// Package lane is group commit without a timer. Callers queue calls on a
// lane, which keeps a fixed number of batches in flight: while a slot is
// free the next call goes at once, alone, so a lone caller waits for
// nobody; once every slot is taken, the calls that arrive meanwhile go
// together in the next free slot, up to the lane's bounds. Docket's Go
// client shares RPCs this way, and the leader's Service shares Raft
// entries.
//
// A lane decides only who goes together. What a batch does, how each
// caller gets its answer and what a caller that left is owed belong to
// its flush function.
package lane

import (
	"context"
	"sync/atomic"
	"time"
)

// Bounds cap one batch; a zero field is no bound. A call that alone
// exceeds a bound still goes, alone.
type Bounds struct {
	Calls  int // calls in one batch
	Weight int // the calls' summed weight (items, task positions)
	Bytes  int // the calls' summed encoded bytes
}

// Lane queues calls of type C and hands them to flush in batches.
type Lane[C any] struct {
	calls   chan C
	sem     chan struct{}
	bounds  Bounds
	measure func(C) (weight, bytes int)
	flush   func(batch []C, done func())
	// held is set while Run holds a call it took from calls and has not
	// flushed yet: that call is queued too, for TryAlone.
	held atomic.Bool
	// extra is the slots a full batch may take beyond sem's (WithBurst);
	// nil: none. heldN counts the calls Run holds while it waits.
	extra chan struct{}
	heldN atomic.Int32
}

// New returns a lane that queues up to queue calls and keeps up to
// inflight batches in flight. measure gives a call's weight and bytes.
// flush runs on Run's goroutine and must not block: it starts the batch
// and calls done once the batch's slot may be used again (from any
// goroutine, exactly once).
func New[C any](queue, inflight int, b Bounds, measure func(C) (weight, bytes int), flush func(batch []C, done func())) *Lane[C] {
	return &Lane[C]{calls: make(chan C, queue), sem: make(chan struct{}, inflight), bounds: b, measure: measure, flush: flush}
}

// Calls is where callers queue their calls; they select on it with their
// own context, so each answers its own way when it cannot wait.
func (l *Lane[C]) Calls() chan<- C { return l.calls }

// Queued is how many calls wait for a slot.
func (l *Lane[C]) Queued() int { return len(l.calls) }

// Waiting is how many calls wait to be sent: those queued, and those Run
// holds while it waits for a slot.
func (l *Lane[C]) Waiting() int {
	n := len(l.calls)
	if h := int(l.heldN.Load()); h > 0 {
		n += h
	} else if l.held.Load() {
		n++
	}
	return n
}

// WithBurst lets a full batch (one at a bound) go in one of up to extra
// slots beyond the lane's inflight while every slot is taken, and returns
// the lane; call it before Run. A lane keeps few batches in flight so
// that each carries what arrived while the others were out; once a batch
// is full nothing more can join it, and waiting for a slot only delays
// it: large items (1 MiB payloads, four to a 4 MiB batch) then keep the
// link busy as with more slots. With extra slots Run collects calls while
// it waits, so Queued no longer counts the ones it holds; Waiting does.
func (l *Lane[C]) WithBurst(extra int) *Lane[C] {
	if extra > 0 {
		l.extra = make(chan struct{}, extra)
	}
	return l
}

// TryAlone takes a slot for a call its caller runs at once, alone, on its
// own goroutine, when no call is queued and a slot is free; it returns the
// func that frees the slot (call it exactly once, when the call is done),
// or nil, and the call then queues on Calls as usual. A lone caller so
// pays no hand-off to Run's goroutine and back: on a 2-core host those
// wake-ups cost a c=1 enqueue 7-10 µs a lane (BENCHMARKS.md,
// "Performance round 4, step 8"). It does not go ahead of
// a call that waits for a slot: Run, blocked on one with that call, gets
// the next slot freed before any TryAlone can take it.
func (l *Lane[C]) TryAlone() (done func()) {
	if len(l.calls) > 0 || l.held.Load() {
		return nil
	}
	select {
	case l.sem <- struct{}{}:
		return l.release
	default:
		return nil
	}
}

// Run takes batches until ctx ends: it waits for a call, then for a free
// slot, then takes what else is queued within the bounds, and flushes.
// A call that does not fit starts the next batch. On a lane WithBurst it
// collects while it waits, and a full batch may take an extra slot. When
// ctx ends it returns the calls it held, if any; the calls still queued
// are Drain's.
func (l *Lane[C]) Run(ctx context.Context) (held []C) {
	var carry C
	carrying := false
	for {
		first := carry
		if !carrying {
			select {
			case first = <-l.calls:
			case <-ctx.Done():
				return nil
			}
		}
		carrying = false
		l.held.Store(true)
		if l.extra != nil {
			var batch []C
			var done func()
			batch, carry, carrying, done = l.waitCollecting(ctx, first)
			if done == nil {
				return batch
			}
			l.held.Store(carrying)
			l.flush(batch, done)
			continue
		}
		// Wait for a slot before collecting: what arrives meanwhile is
		// what the batch carries.
		select {
		case l.sem <- struct{}{}:
		case <-ctx.Done():
			return []C{first}
		}
		batch := []C{first}
		weight, bytes := l.measure(first)
	collect:
		for l.bounds.Calls == 0 || len(batch) < l.bounds.Calls {
			select {
			case c := <-l.calls:
				w, b := l.measure(c)
				if !l.fits(weight+w, bytes+b) {
					carry, carrying = c, true
					break collect
				}
				batch = append(batch, c)
				weight, bytes = weight+w, bytes+b
			default:
				break collect
			}
		}
		l.held.Store(carrying)
		l.flush(batch, l.release)
	}
}

// fits reports whether a batch of this weight and these bytes is within
// the bounds.
func (l *Lane[C]) fits(weight, bytes int) bool {
	return (l.bounds.Weight == 0 || weight <= l.bounds.Weight) && (l.bounds.Bytes == 0 || bytes <= l.bounds.Bytes)
}

// waitCollecting is Run's wait for a slot on a lane WithBurst: it adds
// what arrives to the batch while it waits, and once the batch is full
// (a call did not fit, or a lone call is past a bound) an extra slot
// will do as well. It returns the batch, the call that did not fit, and
// the slot's release; done is nil when ctx ended, and batch is then what
// Run held.
func (l *Lane[C]) waitCollecting(ctx context.Context, first C) (batch []C, carry C, carrying bool, done func()) {
	batch = []C{first}
	weight, bytes := l.measure(first)
	full := !l.fits(weight, bytes) || (l.bounds.Calls > 0 && len(batch) >= l.bounds.Calls)
	defer l.heldN.Store(0)
	for {
		n := len(batch)
		if carrying {
			n++
		}
		l.heldN.Store(int32(n))
		calls, extra := l.calls, chan struct{}(nil)
		if full {
			calls, extra = nil, l.extra
		}
		select {
		case l.sem <- struct{}{}:
			return batch, carry, carrying, l.release
		case extra <- struct{}{}:
			return batch, carry, carrying, l.releaseExtra
		case c := <-calls:
			w, b := l.measure(c)
			if !l.fits(weight+w, bytes+b) {
				carry, carrying, full = c, true, true
				continue
			}
			batch = append(batch, c)
			weight, bytes = weight+w, bytes+b
			full = l.bounds.Calls > 0 && len(batch) >= l.bounds.Calls
		case <-ctx.Done():
			if carrying {
				batch = append(batch, carry)
			}
			return batch, carry, false, nil
		}
	}
}

func (l *Lane[C]) releaseExtra() { <-l.extra }

func (l *Lane[C]) release() { <-l.sem }

// Drain takes the calls still queued, without waiting.
func (l *Lane[C]) Drain() []C {
	var out []C
	for {
		select {
		case c := <-l.calls:
			out = append(out, c)
		default:
			return out
		}
	}
}

// Latest is the latest deadline of the callers one batch serves: the
// batch may run until the last of them needs it.
type Latest struct {
	deadline  time.Time
	unbounded bool // a caller has no deadline
}

// Add counts ctx's deadline; a ctx without one makes the batch unbounded.
func (l *Latest) Add(ctx context.Context) {
	if d, ok := ctx.Deadline(); !ok {
		l.unbounded = true
	} else if d.After(l.deadline) {
		l.deadline = d
	}
}

// Unbound makes the batch run without the callers' deadlines.
func (l *Latest) Unbound() { l.unbounded = true }

// Context is the batch's context: it ends at the latest deadline, or
// with parent when unbounded.
func (l Latest) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if l.unbounded {
		return parent, func() {}
	}
	return context.WithDeadline(parent, l.deadline)
}
