package fsm

import (
	"bytes"
	"fmt"
	"math"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// claimView is the hot queue state that the leader's claim admission
// asks about (ClaimView), held in memory on every replica: per queue its
// pending, delayed and running counts, its configuration (pause, limits,
// rate bucket) and the earliest visible_at of its delayed tasks, and the
// running count of every tenant with a concurrency limit.
//
// Apply writes it after each committed batch from what the batch already
// holds decoded (the catalog, configuration and usage records finish
// wrote), plus one seek of a queue's delayed index when its head left.
// Apply never reads it to decide anything: it reads Pebble, so the view
// cannot change what apply writes. Open and Restore build it from Pebble;
// a panic in apply marks it stale and the next batch rebuilds it.
type claimView struct {
	mu      sync.RWMutex
	queues  map[QueueRef]queueView
	tenants map[string]tenantLimit // only tenants with a concurrency limit
	// stale says the view may miss a committed batch: ClaimView then
	// answers "due", as a failed read did, so the Claim command decides.
	stale bool
	// scratch is applied's working map, the apply goroutine's alone.
	scratch map[QueueRef]queueView
	// keyed holds, per keyed queue, its pending tasks whose keys are below
	// their limit (keyed.go): what a claim of it could take. Apply
	// installs it after each committed batch (setKeyed).
	keyed map[QueueRef]uint64
}

// queueView is one queue's entry; a queue with no task counted and the
// default configuration has none.
type queueView struct {
	pending, delayed, running uint64
	cfg                       *pb.QueueConfig // nil: the default; never changed once stored
	head                      int64           // earliest delayed visible_at, when delayed > 0
}

type tenantLimit struct{ running, max uint64 }

func (q queueView) empty() bool {
	return q.pending == 0 && q.delayed == 0 && q.running == 0 && q.cfg == nil
}

func newClaimView() *claimView {
	return &claimView{queues: map[QueueRef]queueView{}, tenants: map[string]tenantLimit{}}
}

// ClaimView answers what a claim of ref could take on the local replica,
// from memory: how many tasks are pending within the queue's pause and
// limits (pending), whether a delayed task is due by now (due), and when
// the next delayed task becomes visible or, when the rate limit leaves
// none, the next token is due (next, Unix ns; 0 when none). now is the
// caller's clock; the limits use the FSM's time when it is later, as
// apply would. It reads no Pebble and never blocks on apply for longer
// than installing one batch's changes.
func (f *FSM) ClaimView(ref QueueRef, now int64) (pending int, due bool, next int64) {
	return f.ClaimViewAfter(ref, now, 0)
}

// ClaimViewAfter is ClaimView for a claim that applies after up to
// freeing running tasks end in the same entry: a claim that rides on
// submits. A queue or tenant at its running limit, or a key at its
// per-key limit, shows nothing to claim until they end, and the claim
// behind them would take their slots. So it counts freeing of the
// running tasks as gone, from the queue, its tenant and its keys alike.
// Which queue and key each submitted task holds is not known here: the
// answer may be more than the claim gets, never less, and the claim's
// apply holds the limits.
func (f *FSM) ClaimViewAfter(ref QueueRef, now int64, freeing int) (pending int, due bool, next int64) {
	gone := uint64(max(freeing, 0))
	v := f.claims
	v.mu.RLock()
	if v.stale {
		v.mu.RUnlock()
		return 0, true, 0
	}
	q := v.queues[ref]
	tl, limited := v.tenants[ref.Tenant]
	v.mu.RUnlock()
	if q.cfg.GetPaused() {
		return 0, false, 0
	}
	u := storage.TenantUsage{Running: subFloor(tl.running, gone), MaxRunning: tl.max, HasRunning: limited}
	allow, nextToken := allowance(q.cfg, subFloor(q.running, gone), u, max(now, f.now.Load()), math.MaxInt)
	if allow == 0 {
		return 0, false, nextToken
	}
	if free, ok := v.keyedFree(ref); ok && q.pending > 0 {
		// Every key with tasks may be at its limit: a claim would answer
		// empty, so the long poll waits for a running task to end.
		return int(min(free+gone, q.pending, uint64(allow))), false, 0
	}
	if q.pending > 0 || q.delayed == 0 {
		return int(min(q.pending, uint64(allow))), false, 0
	}
	return 0, q.head <= now, q.head
}

// rebuild loads the whole view from r: the catalog, the configuration and
// usage records; and each queue's delayed head from o, the ready order of
// the same state, which the caller holds (or owns alone).
func (v *claimView) rebuild(r storage.Reader, o *readyOrder) error {
	queues := map[QueueRef]queueView{}
	tenants := map[string]tenantLimit{}
	err := scanCatalog(r, func(ref QueueRef, m *storage.QueueMeta) {
		queues[ref] = queueView{pending: m.Pending, delayed: m.Delayed, running: m.Running}
	})
	if err != nil {
		return fmt.Errorf("claim view: catalog: %w", err)
	}
	err = storage.Scan(r, storage.QueueConfigPrefix(), storage.PrefixEnd(storage.QueueConfigPrefix()), 0, func(k, val []byte) error {
		q, tn, err := storage.ParseQueueConfigKey(k)
		if err != nil {
			return err
		}
		cfg, err := storage.UnmarshalQueueConfig(val)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", q, tn, err)
		}
		ref := QueueRef{q, tn}
		e := queues[ref]
		e.cfg = cfg
		queues[ref] = e
		return nil
	})
	if err != nil {
		return fmt.Errorf("claim view: queue configuration: %w", err)
	}
	err = storage.Scan(r, storage.TenantPrefix(), storage.PrefixEnd(storage.TenantPrefix()), 0, func(k, val []byte) error {
		u, err := storage.UnmarshalTenantUsage(val)
		if err != nil {
			return fmt.Errorf("%q: %w", k, err)
		}
		if u.HasRunning && u.MaxRunning > 0 {
			tenants[string(bytes.TrimPrefix(k, storage.TenantPrefix()))] = tenantLimit{running: u.Running, max: u.MaxRunning}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("claim view: tenant usage: %w", err)
	}
	for ref, e := range queues {
		switch {
		case e.empty():
			delete(queues, ref) // a zero record: as if absent
		case e.delayed > 0:
			e.head = o.delayedHead(ref)
			queues[ref] = e
		}
	}
	v.mu.Lock()
	v.queues, v.tenants, v.stale = queues, tenants, false
	v.mu.Unlock()
	return nil
}

// rebuildClaims reloads the claim view from db after a batch that did not
// finish installing its changes; on failure the view stays stale (ClaimView
// then answers "due") and the next batch tries again.
func (f *FSM) rebuildClaims(db *pebble.DB, o *readyOrder) {
	if err := f.claims.rebuild(storage.Wrap(db), o); err != nil {
		f.log.Warn("claim view: rebuild failed; claims propose without it", "err", err)
		return
	}
	f.log.Info("claim view rebuilt", "applied", f.applied.Load())
}

// applied installs what a committed batch changed, the delayed heads
// read from the ready order, which apply still holds. It runs on the apply
// goroutine, the view's only writer, so it reads the view without the
// lock and takes it only to install.
func (v *claimView) applied(tx *txn) {
	if len(tx.metas) == 0 && len(tx.configs) == 0 && len(tx.tenants) == 0 {
		return
	}
	// The batch's entries, built before the lock is taken; the map is
	// reused from batch to batch, so keeping the view allocates nothing.
	if v.scratch == nil {
		v.scratch = map[QueueRef]queueView{}
	}
	queues := v.scratch
	defer clear(queues)
	get := func(ref QueueRef) queueView {
		if e, ok := queues[ref]; ok {
			return e
		}
		return v.queues[ref]
	}
	for _, e := range tx.metas {
		if !e.dirty && !e.dropped {
			continue
		}
		ref := QueueRef{e.queue, e.tenant}
		q := get(ref)
		if e.dirty {
			// Every change to a queue's delayed tasks writes its catalog
			// record, so a queue whose record is clean kept its head.
			q.pending, q.delayed, q.running = e.m.Pending, e.m.Delayed, e.m.Running
			q.head = tx.ready.delayedHead(ref)
		} else {
			q.pending, q.delayed, q.running = 0, 0, 0
		}
		queues[ref] = q
	}
	for ref, cfg := range tx.configs {
		q := get(ref)
		q.cfg = cfg
		queues[ref] = q
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for ref, q := range queues {
		if q.delayed == 0 {
			q.head = 0
		}
		if q.empty() {
			delete(v.queues, ref)
		} else {
			v.queues[ref] = q
		}
	}
	for tn, e := range tx.tenants {
		if !e.dirty {
			continue
		}
		if e.u.HasRunning && e.u.MaxRunning > 0 {
			v.tenants[tn] = tenantLimit{running: e.u.Running, max: e.u.MaxRunning}
		} else {
			delete(v.tenants, tn)
		}
	}
}

// keyedFree is what setKeyed last installed for ref; ok is false for a
// queue that is not keyed.
func (v *claimView) keyedFree(ref QueueRef) (uint64, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	n, ok := v.keyed[ref]
	return n, ok
}

// setKeyed installs every keyed queue's claimable count when one changed.
// It runs on the apply goroutine, the map's only writer, with the keyed
// set's lock held, so it reads the installed map without the view's lock;
// a batch that moved no keyed queue's count allocates nothing.
func (v *claimView) setKeyed(s *keyedSet) {
	same := len(s.queues) == len(v.keyed)
	for ref, kq := range s.queues {
		if n, ok := v.keyed[ref]; !same || !ok || n != uint64(max(kq.claimable, 0)) {
			same = false
			break
		}
	}
	if same {
		return
	}
	m := make(map[QueueRef]uint64, len(s.queues))
	for ref, kq := range s.queues {
		m[ref] = uint64(max(kq.claimable, 0))
	}
	v.mu.Lock()
	v.keyed = m
	v.mu.Unlock()
}

func (v *claimView) markStale() {
	v.mu.Lock()
	v.stale = true
	v.mu.Unlock()
}

func (v *claimView) isStale() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.stale
}

// putConfig writes a queue's configuration record and remembers the value
// for the claim view (write-through: the view never decodes it again).
func (tx *txn) putConfig(q, tn string, cfg *pb.QueueConfig) error {
	if err := storage.PutQueueConfig(&tx.b, q, tn, cfg); err != nil {
		return err
	}
	if err := tx.configChanged(q, tn, cfg); err != nil {
		return err
	}
	if tx.configs == nil {
		tx.configs = map[QueueRef]*pb.QueueConfig{}
	}
	var c *pb.QueueConfig
	if proto.Size(cfg) > 0 { // PutQueueConfig deleted a default record
		c = proto.Clone(cfg).(*pb.QueueConfig)
	}
	tx.configs[QueueRef{q, tn}] = c
	return nil
}

// scanCatalog calls fn with every queue's catalog record, in key order:
// what the claim view and the ready order are built from.
func scanCatalog(r storage.Reader, fn func(QueueRef, *storage.QueueMeta)) error {
	return storage.Scan(r, storage.CatalogPrefix(""), storage.PrefixEnd(storage.CatalogPrefix("")), 0, func(k, val []byte) error {
		q, tn, err := storage.ParseCatalogKey(k)
		if err != nil {
			return err
		}
		m, err := storage.UnmarshalQueueMeta(val)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", q, tn, err)
		}
		fn(QueueRef{q, tn}, &m)
		return nil
	})
}
