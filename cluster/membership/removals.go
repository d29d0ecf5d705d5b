package membership

import (
	"sync"
	"time"
)

// RemovedHold is Rules.RemovedHold: long enough for
// gossip to notice that a removed server stopped (a few seconds), short
// enough that one removed by mistake while running comes back on its own.
const RemovedHold = 30 * time.Second

// Removals are the servers an operator removed, and when, so the leader's
// reconcile does not add one straight back while gossip still shows it
// alive. Leader-local: a new leader has none, and by then gossip knows.
type Removals struct {
	mu sync.Mutex
	at map[string]time.Time
}

// Add records that an operator removed id at at.
func (r *Removals) Add(id string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[string]time.Time{}
	}
	r.at[id] = at
}

// Recent drops removals older than hold and returns a copy of the rest.
func (r *Removals) Recent(now time.Time, hold time.Duration) map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]time.Time{}
	for id, at := range r.at {
		if now.Sub(at) >= hold {
			delete(r.at, id)
			continue
		}
		out[id] = at
	}
	return out
}
