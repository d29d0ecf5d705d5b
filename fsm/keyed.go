package fsm

import (
	"bytes"
	"fmt"
	"math"
	"sync"

	"github.com/google/btree"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Keyed queues: fair queues' per-key state, in memory. A queue is keyed
// when its configuration sets max_running_per_key, order FAIR or a
// per-key debounce (keyedRules). For each keyed queue apply keeps:
//   - per key, its pending tasks per priority by (seq, id), its running
//     count, its turn and its overrides;
//   - per priority, the keys with pending tasks of that priority, in the
//     order a claim serves them: FAIR by (running / weight, turn or head,
//     key), FIFO by (head seq, key).
//
// A claim of a keyed queue walks that order (claimKeyed) instead of the
// queue's pending order, skipping keys at their limit.
//
// What is stored: a key's f/ record holds its overrides (SetKeyLimit) and,
// while it has pending tasks, its turn: the position of the claim that
// last took one of its tasks. Everything else is derived from the task
// records: Open, Restore and a configuration that makes a queue keyed
// build it by reading the queue's pending and running tasks (buildKeyed).
// A key whose record would hold nothing has none, and its turn is 0: it
// is then ordered by its head's seq, the position it joined the order at.
// Whether a record exists is settled after every command (settleKeys), so
// the keyspace does not depend on how entries are grouped into batches.
//
// A task without a key is its own key, as in SQS: it is ordered by its
// seq among the keys and is never limited (it has one task). It has no
// record.
//
// Ownership: apply's, like the ready order; Keys (reads outside apply)
// takes mu, which applySegment holds while it applies. A batch that never
// commits marks it stale and the next batch rebuilds it.
type keyedSet struct {
	mu     sync.Mutex
	queues map[QueueRef]*keyedQueue
	stale  bool
}

type keyedQueue struct {
	fair     bool
	perKey   uint32
	debounce pb.PerKeyPending
	depth    uint32
	keys     map[string]*keyState // by the key's bytes
	own      map[string]*keyState // keyless tasks' own keys, by task id
	active   [MaxPriority + 1]*btree.BTreeG[activeItem]
	// dirty names the keys whose f/ record may differ from what Pebble
	// holds, with the key's bytes: finish writes those that do.
	dirty map[string][]byte
	// gone are the records of keys forgotten since the last write, which
	// finish deletes.
	gone map[string][]byte
	// claimable counts the pending tasks of keys below their limit, for
	// the leader's claim admission (claimView.setKeyed).
	claimable int
}

// keyState is one key of a keyed queue. key is nil for a keyless task's
// own key.
type keyState struct {
	key      []byte
	mk       string // map key: "k"+key, or "t"+task id for an own key
	running  uint32
	turn     uint64
	limit    uint32 // override of the queue's max_running_per_key
	weight   uint32
	npending int
	pending  [MaxPriority + 1]*btree.BTreeG[keyItem]
	placed   [MaxPriority + 1]activeItem // its item in active[p] while in[p]
	in       [MaxPriority + 1]bool
	free     int       // its share of keyedQueue.claimable
	saved    keyRecord // what its f/ record holds in Pebble (zero: none)
}

// keyRecord is the content of a key's f/ record (pb.KeyState); the zero
// value is no record.
type keyRecord struct {
	turn          uint64
	limit, weight uint32
}

func (r keyRecord) proto() *pb.KeyState {
	return &pb.KeyState{Turn: r.turn, MaxRunning: r.limit, Weight: r.weight}
}

type keyItem struct {
	seq uint64
	id  string
}

func keyItemLess(a, b keyItem) bool {
	if a.seq != b.seq {
		return a.seq < b.seq
	}
	return a.id < b.id
}

// activeItem is a key's place in one priority's order.
type activeItem struct {
	running, weight uint32
	at              uint64 // FAIR: turn, or the head's seq when 0; FIFO: the head's seq
	mk              string
}

func fairLess(a, b activeItem) bool {
	// running/weight compared without division: weights are at least 1.
	ra, rb := uint64(a.running)*uint64(b.weight), uint64(b.running)*uint64(a.weight)
	if ra != rb {
		return ra < rb
	}
	if a.at != b.at {
		return a.at < b.at
	}
	return a.mk < b.mk
}

func fifoLess(a, b activeItem) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.mk < b.mk
}

// keyedRules reports whether cfg makes its queue keyed.
func keyedRules(cfg *pb.QueueConfig) bool {
	return cfg.GetMaxRunningPerKey() > 0 || cfg.GetOrder() == pb.QueueOrder_QUEUE_ORDER_FAIR ||
		(cfg.GetPerKeyPending() != pb.PerKeyPending_PER_KEY_PENDING_ALL && cfg.GetPerKeyPendingDepth() > 0)
}

func newKeyedSet() *keyedSet { return &keyedSet{queues: map[QueueRef]*keyedQueue{}} }

func newKeyedQueue(cfg *pb.QueueConfig) *keyedQueue {
	kq := &keyedQueue{keys: map[string]*keyState{}, own: map[string]*keyState{},
		dirty: map[string][]byte{}, gone: map[string][]byte{}}
	kq.configure(cfg)
	return kq
}

// configure takes cfg's rules; a change of order re-sorts every key.
func (kq *keyedQueue) configure(cfg *pb.QueueConfig) {
	fair := cfg.GetOrder() == pb.QueueOrder_QUEUE_ORDER_FAIR
	perKey := cfg.GetMaxRunningPerKey()
	kq.debounce, kq.depth = cfg.GetPerKeyPending(), cfg.GetPerKeyPendingDepth()
	if kq.active[0] != nil && kq.fair == fair {
		if perKey != kq.perKey {
			kq.perKey = perKey
			kq.each(kq.place) // each key's share of claimable moves with the limit
		}
		return
	}
	kq.perKey = perKey
	kq.fair = fair
	less := fifoLess
	if fair {
		less = fairLess
	}
	for p := range kq.active {
		kq.active[p] = btree.NewG(orderDegree, less)
	}
	kq.each(func(ks *keyState) {
		ks.in = [MaxPriority + 1]bool{}
		kq.place(ks)
	})
}

// each calls fn with every key, own keys included.
func (kq *keyedQueue) each(fn func(*keyState)) {
	for _, ks := range kq.keys {
		fn(ks)
	}
	for _, ks := range kq.own {
		fn(ks)
	}
}

// markStale makes the next batch rebuild the set before it applies.
func (s *keyedSet) markStale() {
	if s != nil {
		s.stale = true
	}
}

// find is t's key, nil when the queue holds none of it. The lookups
// convert the key's bytes without allocating.
func (kq *keyedQueue) find(t *pb.Task) *keyState {
	if k := t.GetKey(); len(k) > 0 {
		return kq.keys[string(k)]
	}
	return kq.own[t.GetId()]
}

// findOrAdd is t's key, created when the queue holds none of it.
func (kq *keyedQueue) findOrAdd(t *pb.Task) *keyState {
	if ks := kq.find(t); ks != nil {
		return ks
	}
	if k := t.GetKey(); len(k) > 0 {
		return kq.named(k)
	}
	ks := &keyState{mk: "t" + t.GetId()}
	kq.own[t.GetId()] = ks
	return ks
}

// named is the key with these bytes, created when absent.
func (kq *keyedQueue) named(key []byte) *keyState {
	ks := kq.keys[string(key)]
	if ks == nil {
		ks = &keyState{key: bytes.Clone(key), mk: "k" + string(key)}
		kq.keys[string(key)] = ks
	}
	return ks
}

// byMK is the key an order item names.
func (kq *keyedQueue) byMK(mk string) *keyState {
	if mk[0] == 'k' {
		return kq.keys[mk[1:]]
	}
	return kq.own[mk[1:]]
}

// forget drops a key with no task and no override; its record, if Pebble
// holds one, is deleted at the batch's end.
func (kq *keyedQueue) forget(ks *keyState) {
	kq.place(ks) // out of every order
	if ks.key == nil {
		delete(kq.own, ks.mk[1:])
		return
	}
	delete(kq.keys, string(ks.key))
	delete(kq.dirty, ks.mk)
	if ks.saved != (keyRecord{}) {
		kq.gone[ks.mk] = ks.key
	}
}

// item is ks's place in priority p's order.
func (kq *keyedQueue) item(ks *keyState, p int) activeItem {
	head, _ := ks.pending[p].Min()
	it := activeItem{running: ks.running, weight: max(ks.weight, 1), at: head.seq, mk: ks.mk}
	if kq.fair && ks.turn > 0 {
		it.at = ks.turn
	}
	return it
}

// place puts ks where it belongs in every priority's order, after any of
// the fields the orders read changed.
func (kq *keyedQueue) place(ks *keyState) {
	free := 0
	if l := kq.limitOf(ks); l == 0 || ks.running < l {
		free = ks.npending
	}
	kq.claimable += free - ks.free
	ks.free = free
	for p := range ks.pending {
		has := ks.pending[p] != nil && ks.pending[p].Len() > 0
		var it activeItem
		if has {
			it = kq.item(ks, p)
			if ks.in[p] && it == ks.placed[p] {
				continue // an enqueue behind the key's head moves nothing
			}
		}
		if ks.in[p] {
			kq.active[p].Delete(ks.placed[p])
			ks.in[p] = false
		}
		if has {
			ks.placed[p] = it
			kq.active[p].ReplaceOrInsert(it)
			ks.in[p] = true
		}
	}
}

// stored reports whether ks has a f/ record.
func (ks *keyState) stored() bool {
	return ks.key != nil && (ks.limit > 0 || ks.weight > 0 || (ks.turn > 0 && ks.npending > 0))
}

// record is what ks's f/ record holds.
func (ks *keyState) record() keyRecord {
	s := keyRecord{limit: ks.limit, weight: ks.weight}
	if ks.npending > 0 {
		s.turn = ks.turn
	}
	return s
}

// record0 is the record as loaded: before the key's pending tasks are
// counted, its turn is kept as read.
func (ks *keyState) record0() keyRecord {
	return keyRecord{turn: ks.turn, limit: ks.limit, weight: ks.weight}
}

// limitOf is the most tasks of ks that may run at once; 0 for no limit.
func (kq *keyedQueue) limitOf(ks *keyState) uint32 {
	if ks.key == nil {
		return 0
	}
	l := kq.perKey
	if ks.limit > 0 {
		l = ks.limit
	}
	if l > 0 && planted(PlantKeyLimitOffByOne) {
		l++
	}
	return l
}

// touch marks ks changed by the command being applied: its record is
// settled after the command and written at the batch's end.
func (tx *txn) touchKey(ref QueueRef, kq *keyedQueue, ks *keyState) {
	if ks.key != nil {
		kq.dirty[ks.mk] = ks.key
	}
	tx.touchedKeys = append(tx.touchedKeys, touchedKey{ref, ks.mk})
}

type touchedKey struct {
	ref QueueRef
	mk  string
}

// keyedOf is t's keyed queue, nil when its queue is not keyed.
func (tx *txn) keyedOf(t *pb.Task) (QueueRef, *keyedQueue) {
	ref := QueueRef{t.GetQueue(), t.GetTenant()}
	if tx.keyed == nil || len(tx.keyed.queues) == 0 {
		// Every write, move and enqueue asks: without a keyed queue the
		// answer costs no hash of the queue's name.
		return ref, nil
	}
	return ref, tx.keyed.queues[ref]
}

// keyedLeave takes a pending task out of its key, before its fields change
// (txn.move, txn.remove).
func (tx *txn) keyedLeave(t *pb.Task) {
	if t.GetState() != pb.TaskState_TASK_STATE_PENDING {
		return
	}
	ref, kq := tx.keyedOf(t)
	if kq == nil {
		return
	}
	ks := kq.find(t)
	if ks == nil || ks.pending[t.GetPriority()] == nil {
		return
	}
	if _, ok := ks.pending[t.GetPriority()].Delete(keyItem{t.GetSeq(), t.GetId()}); !ok {
		return
	}
	ks.npending--
	kq.place(ks)
	tx.touchKey(ref, kq, ks)
}

// keyedEnter adds a task that became pending to its key, and counts one
// that started or stopped running (txn.write, after the move).
func (tx *txn) keyedEnter(t *pb.Task, from pb.TaskState) {
	ref, kq := tx.keyedOf(t)
	if kq == nil {
		return
	}
	st := t.GetState()
	was, is := from == pb.TaskState_TASK_STATE_RUNNING, st == pb.TaskState_TASK_STATE_RUNNING
	if st != pb.TaskState_TASK_STATE_PENDING && was == is {
		return
	}
	if len(t.GetKey()) == 0 && st != pb.TaskState_TASK_STATE_PENDING {
		return // an own key counts nothing once its one task left pending
	}
	ks := kq.findOrAdd(t)
	if st == pb.TaskState_TASK_STATE_PENDING {
		p := t.GetPriority()
		if ks.pending[p] == nil {
			ks.pending[p] = btree.NewG(orderDegree, keyItemLess)
		}
		if _, dup := ks.pending[p].ReplaceOrInsert(keyItem{t.GetSeq(), t.GetId()}); !dup {
			ks.npending++
		}
	}
	switch {
	case is && !was:
		ks.running++
	case was && !is:
		ks.running = max(ks.running, 1) - 1
	}
	kq.place(ks)
	if was == is {
		// A task added behind others changes neither the key's record (a
		// turn is kept only while tasks are pending, and is 0 when none
		// were) nor whether it is kept: nothing to settle or write.
		return
	}
	tx.touchKey(ref, kq, ks)
}

// settleKeys applies the record rule to the keys the command touched: a
// key with no pending task, or whose record would hold nothing, loses its
// turn, and a key with no task and no override is forgotten.
func (tx *txn) settleKeys() {
	for _, tk := range tx.touchedKeys {
		kq := tx.keyed.queues[tk.ref]
		if kq == nil {
			continue
		}
		ks := kq.byMK(tk.mk)
		if ks == nil {
			continue
		}
		// The record keeps a turn only while tasks are pending, so
		// memory must not either: a restart would order the key apart.
		if ks.turn > 0 && (!ks.stored() || ks.npending == 0) {
			ks.turn = 0
			kq.place(ks)
		}
		if ks.npending == 0 && ks.running == 0 && ks.limit == 0 && ks.weight == 0 {
			kq.forget(ks)
		}
	}
	tx.touchedKeys = tx.touchedKeys[:0]
}

// writeKeys writes the f/ records of the keys the batch changed.
func (tx *txn) writeKeys() error {
	if tx.keyed == nil {
		return nil
	}
	for ref, kq := range tx.keyed.queues {
		if err := kq.flush(tx, ref); err != nil {
			return err
		}
	}
	return nil
}

// flush writes the f/ records of the queue's keys the batch changed.
func (kq *keyedQueue) flush(tx *txn, ref QueueRef) error {
	for _, key := range kq.gone {
		if err := storage.PutKeyState(&tx.b, ref.Queue, ref.Tenant, key, &pb.KeyState{}); err != nil {
			return err
		}
	}
	clear(kq.gone)
	for _, key := range kq.dirty {
		ks := kq.keys[string(key)]
		var s keyRecord
		if ks.stored() {
			s = ks.record()
		}
		if s == ks.saved {
			continue // most enqueues leave the record as it is
		}
		if err := storage.PutKeyState(&tx.b, ref.Queue, ref.Tenant, key, s.proto()); err != nil {
			return err
		}
		ks.saved = s
	}
	clear(kq.dirty)
	return nil
}

// rebuild builds every keyed queue from the keyspace and the ready order,
// which must be of the same state.
func (s *keyedSet) rebuild(r storage.Reader, ready *readyOrder) error {
	queues := map[QueueRef]*keyedQueue{}
	err := storage.Scan(r, storage.QueueConfigPrefix(), storage.PrefixEnd(storage.QueueConfigPrefix()), 0,
		func(k, v []byte) error {
			cfg, err := storage.UnmarshalQueueConfig(v)
			if err != nil || !keyedRules(cfg) {
				return err
			}
			q, tn, err := storage.ParseQueueConfigKey(k)
			if err != nil {
				return err
			}
			queues[QueueRef{q, tn}] = newKeyedQueue(cfg)
			return nil
		})
	if err != nil {
		return fmt.Errorf("keyed queues: %w", err)
	}
	for ref, kq := range queues {
		if err := kq.build(r, ref, ready); err != nil {
			return err
		}
	}
	s.queues, s.stale = queues, false
	return nil
}

// build reads one queue's key records, and takes its pending and running
// tasks from the ready order.
func (kq *keyedQueue) build(r storage.Reader, ref QueueRef, ready *readyOrder) error {
	err := storage.ScanKeyStates(r, ref.Queue, ref.Tenant, func(key []byte, s *pb.KeyState) error {
		ks := kq.named(key)
		ks.turn, ks.limit, ks.weight = s.GetTurn(), s.GetMaxRunning(), s.GetWeight()
		ks.saved = ks.record0()
		return nil
	})
	if err != nil {
		return fmt.Errorf("keys of %s/%s: %w", ref.Queue, ref.Tenant, err)
	}
	read := func(id string) (*pb.Task, error) {
		t, _, err := storage.GetTaskHeader(r, id)
		if err != nil {
			return nil, fmt.Errorf("keys of %s/%s: task %s: %w", ref.Queue, ref.Tenant, id, err)
		}
		return t, nil
	}
	for p := 0; p <= int(MaxPriority); p++ {
		for _, h := range ready.heads(ref, uint32(p), 0, math.MaxInt) {
			t, err := read(h.id)
			if err != nil {
				return fmt.Errorf("pending keys of %s/%s: %w", ref.Queue, ref.Tenant, err)
			}
			ks := kq.findOrAdd(t)
			if ks.pending[p] == nil {
				ks.pending[p] = btree.NewG(orderDegree, keyItemLess)
			}
			ks.pending[p].ReplaceOrInsert(keyItem(h))
			ks.npending++
		}
	}
	for _, id := range ready.runningIDs(ref) {
		t, err := read(id)
		if err != nil {
			return fmt.Errorf("running keys of %s/%s: %w", ref.Queue, ref.Tenant, err)
		}
		if len(t.GetKey()) > 0 {
			kq.findOrAdd(t).running++
		}
	}
	kq.each(kq.place)
	return nil
}

// configChanged follows a queue's configuration into the keyed set: a
// queue that becomes keyed is built from the keyspace (through the batch),
// one that stops being keyed keeps only its keys' overrides.
func (tx *txn) configChanged(q, tn string, cfg *pb.QueueConfig) error {
	if tx.keyed == nil {
		return nil
	}
	ref := QueueRef{q, tn}
	kq := tx.keyed.queues[ref]
	switch {
	case kq != nil && keyedRules(cfg):
		kq.configure(cfg)
	case kq != nil:
		if err := kq.flush(tx, ref); err != nil {
			return err
		}
		for _, ks := range kq.keys {
			if ks.saved.turn == 0 {
				continue // the record holds overrides only, or there is none
			}
			s := &pb.KeyState{MaxRunning: ks.limit, Weight: ks.weight}
			if err := storage.PutKeyState(&tx.b, q, tn, ks.key, s); err != nil {
				return err
			}
		}
		delete(tx.keyed.queues, ref)
	case keyedRules(cfg):
		kq = newKeyedQueue(cfg)
		if err := kq.build(tx.r, ref, tx.ready); err != nil {
			return err
		}
		tx.keyed.queues[ref] = kq
		kq.each(func(ks *keyState) { tx.touchKey(ref, kq, ks) })
	}
	return nil
}

// queue is the keyed queue q/tn, nil when it is not keyed.
func (s *keyedSet) queue(q, tn string) *keyedQueue {
	if s == nil {
		return nil
	}
	return s.queues[QueueRef{q, tn}]
}
