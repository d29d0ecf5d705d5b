package transport

import (
	"sync"

	"github.com/dockethq/docket/fsm"
)

// hub fans the FSM's one observer out to the RPCs waiting on it: long-poll
// Claims wait per queue and tenant, WaitResults per task.
//
// Each watched key has one signal, a channel closed (and dropped from the
// map) when an event names the key: every waiter holding it wakes, and the
// next watch makes a fresh one. A waiter takes its channel before it looks
// at the FSM, so an event applied between its look and its wait still
// wakes it.
type hub struct {
	mu     sync.Mutex
	queues map[fsm.QueueRef]*signal
	tasks  map[string]*signal
}

type signal struct {
	ch   chan struct{}
	refs int
}

func newHub() *hub {
	return &hub{queues: map[fsm.QueueRef]*signal{}, tasks: map[string]*signal{}}
}

// watchQueue returns a channel closed when ref gains claimable tasks, and
// a release to call when done waiting.
func (h *hub) watchQueue(ref fsm.QueueRef) (<-chan struct{}, func()) {
	return watch(&h.mu, h.queues, ref)
}

// watchTask returns a channel closed when task id reaches a terminal state.
func (h *hub) watchTask(id string) (<-chan struct{}, func()) {
	return watch(&h.mu, h.tasks, id)
}

func watch[K comparable](mu *sync.Mutex, m map[K]*signal, k K) (<-chan struct{}, func()) {
	mu.Lock()
	defer mu.Unlock()
	sig := m[k]
	if sig == nil {
		sig = &signal{ch: make(chan struct{})}
		m[k] = sig
	}
	sig.refs++
	var once sync.Once
	return sig.ch, func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			sig.refs--
			if sig.refs == 0 && m[k] == sig {
				delete(m, k)
			}
		})
	}
}

// observe is the FSM observer. It runs on Raft's apply goroutine, so it
// only closes channels under a short lock: it never blocks.
func (h *hub) observe(ev fsm.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ref := range ev.Pending {
		if sig := h.queues[ref]; sig != nil {
			close(sig.ch)
			delete(h.queues, ref)
		}
	}
	for _, id := range ev.Finished {
		if sig := h.tasks[id]; sig != nil {
			close(sig.ch)
			delete(h.tasks, id)
		}
	}
}

// kick wakes the Claims waiting on ref, as an event naming it would.
func (h *hub) kick(ref fsm.QueueRef) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sig := h.queues[ref]; sig != nil {
		close(sig.ch)
		delete(h.queues, ref)
	}
}

// waiting is how many keys have waiters, for tests and the gauge.
func (h *hub) waiting() (queues, tasks int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.queues), len(h.tasks)
}
