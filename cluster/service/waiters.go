package service

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/dockethq/docket/fsm"
)

// hub fans the FSM's one observer out to the calls waiting on it: long-poll
// Claims wait per queue and tenant, WaitResults per task.
//
// A task's waiters share one signal, a channel closed (and dropped from
// the map) when an event names the task. A queue's waiters each have their
// own signal, in arrival order, and an event or kick wakes only as many of
// them as can claim, oldest first: waking every waiter of a queue for each
// enqueue cost 256 wake-ups and catalog reads per applied batch in the
// cycle benchmark. A waiter takes its signal before it looks at the FSM,
// so an event applied between its look and its wait still wakes it.
//
// How many can claim is the queue's pending count less the tasks that
// claims in flight reserved (claimGate). On the apply goroutine the count
// comes with the FSM's Event, so the observer never reads Pebble; a
// claimer that wakes its successors reads the catalog itself.
type hub struct {
	mu     sync.Mutex
	queues map[fsm.QueueRef]*list.List // of *queueWaiter
	tasks  map[string]*signal
	gate   *claimGate
	asleep atomic.Int64 // calls inside Service.sleep
}

type signal struct {
	ch   chan struct{}
	refs int
}

type queueWaiter struct {
	ch    chan struct{}
	woken bool // set under hub.mu when taken off the list and signalled
}

func newHub(gate *claimGate) *hub {
	return &hub{queues: map[fsm.QueueRef]*list.List{}, tasks: map[string]*signal{}, gate: gate}
}

// watchQueue returns a channel closed when this waiter of ref may claim,
// and a release to call when done waiting.
func (h *hub) watchQueue(ref fsm.QueueRef) (<-chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.queues[ref]
	if l == nil {
		l = list.New()
		h.queues[ref] = l
	}
	w := &queueWaiter{ch: make(chan struct{})}
	e := l.PushBack(w)
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if w.woken {
				return // already off the list
			}
			l.Remove(e)
			if l.Len() == 0 && h.queues[ref] == l {
				delete(h.queues, ref)
			}
		})
	}
}

// hasWaiters reports whether anyone waits on ref, so that a caller can
// skip reading the catalog for a queue nobody waits on.
func (h *hub) hasWaiters(ref fsm.QueueRef) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.queues[ref]
	return ok
}

// wakeQueue wakes the oldest n waiters of ref.
func (h *hub) wakeQueue(ref fsm.QueueRef, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.queues[ref]
	for ; n > 0 && l != nil && l.Len() > 0; n-- {
		w := l.Remove(l.Front()).(*queueWaiter)
		w.woken = true
		close(w.ch)
	}
	if l != nil && l.Len() == 0 {
		delete(h.queues, ref)
	}
}

// watchTask returns a channel closed when task id reaches a terminal state.
func (h *hub) watchTask(id string) (<-chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sig := h.tasks[id]
	if sig == nil {
		sig = &signal{ch: make(chan struct{})}
		h.tasks[id] = sig
	}
	sig.refs++
	var once sync.Once
	return sig.ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			sig.refs--
			if sig.refs == 0 && h.tasks[id] == sig {
				delete(h.tasks, id)
			}
		})
	}
}

// observe is the FSM observer. It runs on Raft's apply goroutine: it wakes
// waiters from the event's own counts, closing channels under short locks,
// and reads nothing from Pebble (Test_ObserverReadsNoPebble).
func (h *hub) observe(ev fsm.Event) {
	if ev.Restored {
		h.wakeAll()
		return
	}
	for _, c := range ev.Pending {
		if h.hasWaiters(c.QueueRef) {
			h.wakeQueue(c.QueueRef, h.gate.free(c.QueueRef, int(min(c.Pending, uint64(maxInt)))))
		}
	}
	for _, tn := range ev.Freed {
		h.wakeTenant(tn)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ev.Finished {
		if sig := h.tasks[id]; sig != nil {
			close(sig.ch)
			delete(h.tasks, id)
		}
	}
}

// wakeAll wakes every waiter: a restore replaced the keyspace, and the
// event cannot say which queues or tasks changed. Each looks again and
// sleeps anew if nothing is there for it; a restore is rare.
func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ref, l := range h.queues {
		for l.Len() > 0 {
			w := l.Remove(l.Front()).(*queueWaiter)
			w.woken = true
			close(w.ch)
		}
		delete(h.queues, ref)
	}
	for id, sig := range h.tasks {
		close(sig.ch)
		delete(h.tasks, id)
	}
}

const maxInt = int(^uint(0) >> 1)

// waiting is how many keys have waiters.
func (h *hub) waiting() (queues, tasks int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.queues), len(h.tasks)
}

// sleepers is how many calls wait right now.
func (h *hub) sleepers() int { return int(h.asleep.Load()) }
