package fsm

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Options configure an FSM. FS, MaxOpenFiles, MemTableBytes, OnDiskEvent
// and InlineValues pass through to storage.DBOptions, which owns Pebble.
type Options struct {
	// Logger gets Pebble's messages and the FSM's own; nil discards.
	Logger *slog.Logger
	// FS is the filesystem Pebble writes to; nil means the OS disk. Tests
	// pass vfs.NewCrashableMem() to drop unsynced writes.
	FS vfs.FS
	// OnLogFault, when set, is called once, when ApplyBatch meets an entry
	// that fails its proposer's checksum or a read meets damaged bytes in
	// the keyspace (see LogFault): on the apply goroutine, or on Pebble's
	// for damage a compaction found. It must not block.
	OnLogFault func(error)
	// RecentRecordBytes bounds apply's cache of task records it wrote
	// lately (recent.go); 0 means DefaultRecentRecordBytes and a negative
	// value turns it off. It changes only speed, never state, so replicas
	// may differ in it.
	RecentRecordBytes int
	// MaxOpenFiles bounds the files Pebble keeps open (pebble.Options'
	// MaxOpenFiles, its table cache); 0 means Pebble's default, 1000. A
	// node sets it inside its file descriptor reserve.
	MaxOpenFiles int
	// OnDiskEvent, when set, receives Pebble's background errors and write
	// stalls (storage/events.go) instead of Pebble logging each one. It is
	// called on Pebble's goroutines and must not block.
	OnDiskEvent func(storage.DiskEvent)
	// MemTableBytes overrides the largest memtable (storage's
	// memTableBytes); 0 keeps it. Writes stall once two memtables wait for a flush, so tests set it
	// small to reach a stall with a few MiB instead of 64.
	MemTableBytes int
	// NoCompactions turns Pebble's automatic compactions off
	// (storage.DBOptions.NoCompactions); for tests only.
	NoCompactions bool
	// InlineValues keeps large values inside Pebble's tables instead of
	// blob files (storage.DBOptions.InlineValues); benchmarks set it.
	InlineValues bool
	// MaxLevel caps the feature level this FSM applies (features.go); 0
	// means BuildLevel(). Tests set it to run an older build's rules.
	MaxLevel uint32
	// CheckpointEntries, above 1, lets apply's writes reach Pebble once a
	// window of this many entries instead of once an apply segment, with
	// each task record written once, as its last value (checkpoint.go).
	// 0 or 1 commits every segment. It changes only when Pebble is
	// written and how much a restart replays, so replicas may differ in it.
	CheckpointEntries int
	// CheckpointBytes ends a window early once its task records hold this
	// many bytes; 0 means DefaultCheckpointBytes.
	CheckpointBytes int
}

// QueueRef names one queue of one tenant.
type QueueRef struct{ Queue, Tenant string }

// Event tells an observer what an applied batch changed that a waiter may
// care about. It carries the pending counts the batch already holds, so
// the observer, on Raft's apply goroutine, never reads Pebble.
type Event struct {
	Index    uint64       // last index applied
	Pending  []QueueCount // queues that gained claimable tasks
	Finished []string     // ids of tasks that reached a terminal state
	// Restored says a snapshot replaced the whole keyspace: any queue may
	// have claimable tasks and any task may have finished, so every waiter
	// looks again. Pending and Finished are empty then.
	Restored bool
	// Freed names tenants with a concurrency limit whose running tasks
	// dropped: a claim of any of their queues may take a task now.
	Freed []string
}

// QueueCount is a queue's pending count at the end of an applied batch.
type QueueCount struct {
	QueueRef
	Pending uint64
}

// FSM is Docket's replicated state machine over one Pebble database. It
// implements raft.FSM and raft.BatchingFSM. Apply, ApplyBatch, Snapshot and
// Restore are called by Raft from one goroutine; the read methods may be
// called from any goroutine.
type FSM struct {
	home *storage.Home // the directory, Pebble's tuning and the restore swap
	opts Options
	log  *slog.Logger

	mu     sync.RWMutex // guards db, recent and ready against the swap in Restore
	db     *pebble.DB
	recent *recentRecords // apply's alone; nil when off or closed
	ready  *readyOrder    // apply's, and readers' under its lock; nil when closed
	// keyed is the per-key state of keyed queues (keyed.go): apply's,
	// with its own lock for Keys.
	keyed *keyedSet

	snapBytes atomic.Int64 // size of the last persisted snapshot
	snapMu    sync.Mutex
	snaps     map[*fsmSnapshot]struct{} // open snapshots of db

	applied  atomic.Uint64
	now      atomic.Int64
	feature  atomic.Uint32          // the latched feature level (features.go)
	cluster  atomic.Pointer[string] // the cluster's id, nil before SetClusterID (identity.go)
	observer atomic.Pointer[func(Event)]

	logFault atomic.Pointer[error] // set once; then nothing more applies
	checkObs atomic.Pointer[func(CheckEvent)]

	// claims is the hot queue state claim admission reads (ClaimView):
	// apply keeps it, Open and Restore build it (claimview.go).
	claims *claimView

	// pend is the open checkpoint window (checkpoint.go), nil when none:
	// guarded by ready.mu. checkpoints counts the windows committed.
	pend        *pendingCheckpoint
	checkpoints atomic.Uint64
	windowKeys  keyFamilies  // what the open window wrote (checkpoint.go)
	spare       dirtyRecords // the last window's, emptied, for the next

	reads atomic.Uint64 // read API calls that opened the keyspace (Reads)
	// written counts the bytes of the batches apply committed: what the
	// WAL took in when Pebble had one, and what the memtables take in now.
	written atomic.Uint64
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// Open opens (or creates) the FSM's keyspace under dir, finishing a
// restore that a crash interrupted. The directory I/O and Pebble's tuning
// are storage's (storage.Home); the FSM keeps only what it loads from the
// keyspace.
func Open(dir string, opts Options) (*FSM, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	f := &FSM{opts: opts, log: opts.Logger.With("component", "fsm"), snaps: map[*fsmSnapshot]struct{}{},
		claims: newClaimView(), keyed: newKeyedSet()}
	home, err := storage.OpenHome(dir, f.dbOptions())
	if err != nil {
		return nil, fmt.Errorf("fsm: %w", err)
	}
	f.home = home
	if err := f.openKeyspace(); storage.IsDamage(err) {
		return nil, fmt.Errorf("fsm: %w", home.Damaged(err)) // and every later open refuses too
	} else if err != nil {
		return nil, err
	}
	return f, nil
}

// dbOptions passes the storage half of Options through.
func (f *FSM) dbOptions() storage.DBOptions {
	return storage.DBOptions{
		Logger:        f.log,
		FS:            f.opts.FS,
		MaxOpenFiles:  f.opts.MaxOpenFiles,
		MemTableBytes: f.opts.MemTableBytes,
		NoCompactions: f.opts.NoCompactions,
		OnDiskEvent:   f.opts.OnDiskEvent,
		InlineValues:  f.opts.InlineValues,
		OnDamage:      func(err error) { f.setFault(err, damagedMsg) },
	}
}

// openKeyspace opens the live Pebble database and loads what the FSM keeps
// in memory from it: the applied index, the time, the idempotency index
// and the claim view. On error nothing stays open.
func (f *FSM) openKeyspace() error {
	db, err := f.home.OpenLive()
	if err != nil {
		return err
	}
	if err := f.loadMeta(db); err != nil {
		return errors.Join(err, db.Close())
	}
	ready := newReadyOrder()
	if err := ready.rebuild(storage.Wrap(db)); err != nil {
		return errors.Join(err, db.Close())
	}
	if err := f.claims.rebuild(storage.Wrap(db), ready); err != nil { // its delayed heads are the order's
		return errors.Join(err, db.Close())
	}
	f.log.Debug("idempotency index built", "live_keys", ready.idem.len())
	// The keyed queues read their pending tasks from the ready order.
	f.keyed.mu.Lock()
	err = f.keyed.rebuild(storage.Wrap(db), ready)
	if err == nil {
		f.claims.setKeyed(f.keyed)
	}
	f.keyed.mu.Unlock()
	if err != nil {
		return errors.Join(err, db.Close())
	}
	f.db, f.recent, f.ready = db, f.openRecent(), ready // a new keyspace, an empty cache
	return nil
}

func (f *FSM) loadMeta(db *pebble.DB) error {
	r := storage.Wrap(db)
	applied, err := storage.GetUint64(r, storage.KeyApplied)
	if err != nil {
		return fmt.Errorf("read applied index: %w", err)
	}
	now, err := storage.GetUint64(r, storage.KeyNow)
	if err != nil {
		return fmt.Errorf("read now: %w", err)
	}
	feature, err := storage.GetUint64(r, storage.KeyFeature)
	if err != nil {
		return fmt.Errorf("read feature level: %w", err)
	}
	if have := BuildLevel(); feature > uint64(have) {
		// The keyspace may hold records this build cannot read (split
		// task records from level 13 on): a downgraded binary, or a
		// snapshot from a newer cluster restored into an older one.
		return fmt.Errorf("%w: the keyspace was written at feature level %d and this build applies up to %d; run a newer build", ErrKeyspaceTooNew, feature, have)
	}
	id, err := readClusterID(r)
	if err != nil {
		return err
	}
	f.applied.Store(applied)
	f.now.Store(int64(now))
	f.feature.Store(uint32(feature))
	f.cluster.Store(id)
	return nil
}

// Close flushes and closes Pebble. Raft must be shut down first. Pebble
// has no WAL, so the flush is what keeps the applied state for the next
// start; if it fails (a full disk), Close closes anyway and reports it,
// and the next start replays from the Raft log what the flush missed.
func (f *FSM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db == nil {
		return nil
	}
	f.closeSnapshots()
	f.checkpoint() // then the flush writes it
	ferr := storage.Flush(f.db, storage.FlushTimeout)
	if ferr != nil {
		f.log.Warn("close: applied state not flushed; the next start replays it from the Raft log",
			"applied", f.applied.Load(), "err", ferr)
	}
	err := f.db.Close()
	f.db, f.recent, f.ready = nil, nil, nil
	f.claims.markStale() // a closed FSM answers nothing from memory either
	if err := errors.Join(ferr, err); err != nil {
		return fmt.Errorf("close fsm: %w", err)
	}
	return nil
}

// AppliedIndex is the last Raft index whose effects are in Pebble.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Now is the last leader time the FSM applied (Unix ns).
func (f *FSM) Now() int64 { return f.now.Load() }

// SetObserver registers fn to be called after each applied batch, on Raft's
// apply goroutine: it must not block. nil removes it.
func (f *FSM) SetObserver(fn func(Event)) {
	if fn == nil {
		f.observer.Store(nil)
		return
	}
	f.observer.Store(&fn)
}

// Apply applies one log entry; it returns a *pb.CommandResult, or nil for
// entries that are not commands or were applied before.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies entries in one Pebble batch together with the new
// applied index, so a crash keeps all of them or none. Entries at or below
// the applied index are skipped: claims and attempt counters are not
// idempotent. A Pebble write error or an undecodable entry panics: going on
// would leave this replica different from the others.
//
// Every command's proposer checksum is checked before any entry of the
// batch applies. The entries before a damaged one apply; the damaged one and
// everything after it do not, now or ever: their results are the error, the
// FSM records it (LogFault) and refuses snapshots, since Raft would label
// one with an index the keyspace never reached.
//
// A Check entry ends its Pebble batch: the batch is committed through the
// Check's index and the check's snapshot taken right then, so every replica
// hashes the keyspace at exactly that index however Raft grouped the
// entries. The keyspace does not depend on the grouping (txn.go), so the
// extra commit changes nothing else.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	results := make([]interface{}, len(logs))
	if err := f.LogFault(); err != nil {
		for i := range results {
			results[i] = err
		}
		return results
	}
	good, bad := len(logs), error(nil)
	for i, l := range logs {
		if err := VerifyCommand(l); err != nil {
			good, bad = i, err
			break
		}
	}
	done := 0
	for done < good && f.LogFault() == nil {
		done += f.applySegment(logs[done:good], results[done:good])
	}
	if err := f.LogFault(); err != nil {
		for j := done; j < good; j++ {
			results[j] = err
		}
	}
	if bad != nil {
		for j := good; j < len(logs); j++ {
			results[j] = bad
		}
		f.setLogFault(bad)
	}
	return results
}

// LogFault is the fault that stopped this FSM applying, or nil: an entry
// that failed its proposer's checksum (it wraps ErrChecksum) or damaged
// bytes in the keyspace (it wraps storage.ErrDamaged).
func (f *FSM) LogFault() error {
	if p := f.logFault.Load(); p != nil {
		return *p
	}
	return nil
}

func (f *FSM) setLogFault(err error) {
	f.setFault(err, "log entry failed its proposer's checksum: this replica applies nothing more until it is repaired")
}

func (f *FSM) setFault(err error, msg string) {
	if !f.logFault.CompareAndSwap(nil, &err) {
		return
	}
	f.log.Error(msg, "err", err, "applied", f.applied.Load())
	if f.opts.OnLogFault != nil {
		f.opts.OnLogFault(err)
	}
}

// applySegment applies logs up to and including the first Check entry in
// one Pebble batch, fills results and returns how many entries it took.
func (f *FSM) applySegment(logs []*raft.Log, results []interface{}) int {
	f.mu.RLock()
	db, recent, ready := f.db, f.recent, f.ready
	f.mu.RUnlock()
	// The ready order's lock is held up to the commit, so that a reader
	// outside apply (orderView) sees it and Pebble at one state.
	ready.mu.Lock()
	readyHeld := true
	unlockReady := func() {
		if readyHeld {
			readyHeld = false
			ready.mu.Unlock()
		}
	}
	defer unlockReady()
	if ready.stale {
		if err := ready.rebuild(storage.Wrap(db)); err != nil {
			panic(fmt.Sprintf("docket fsm: rebuild the ready order: %v", err))
		}
	}
	if f.claims.isStale() { // its delayed heads are the order's
		f.rebuildClaims(db, ready)
	}
	keyed := f.keyed
	keyed.mu.Lock()
	defer keyed.mu.Unlock()
	if keyed.stale {
		if err := keyed.rebuild(storage.Wrap(db), ready); err != nil {
			panic(fmt.Sprintf("docket fsm: rebuild the keyed queues: %v", err))
		}
	}
	// With a checkpoint window (checkpoint.go) the segment writes into the
	// window's batch and dirty records, and commits only when the window
	// is due.
	windowed, held := f.windowed(), 0
	if windowed && f.pend == nil {
		f.pend = &pendingCheckpoint{b: newApplyBatch(db), dirty: f.spare}
		f.pend.dirty.fam, f.spare = &f.windowKeys, dirtyRecords{}
	}
	var b *pebble.Batch
	if windowed {
		b, held = f.pend.b, f.pend.entries
	} else {
		b = newApplyBatch(db)
	}
	// A panic below (an undecodable entry, a failed write) must not leak
	// the batch: the node's owner may recover and go on. Nor may it leave
	// the claim view a batch behind without saying so, nor the record
	// cache holding writes Pebble may not have taken.
	closed, viewed, committed := false, false, false
	defer func() {
		if !closed {
			_ = b.Close() // abandoning the batch; its error cannot help
			f.pend = nil
		}
		if !viewed {
			f.claims.markStale()
		}
		if !committed {
			recent.clear()
			ready.markStale()
			keyed.markStale()
			if held > 0 {
				f.setFault(errWindowLost, "apply failed inside a checkpoint window")
			}
		}
	}()
	tx := newTxn(b, f.now.Load())
	if windowed {
		tx.useDirty(&f.pend.dirty)
	}
	tx.useRecent(recent)
	tx.ready = ready
	tx.keyed = keyed
	tx.feature = f.feature.Load()
	applied := f.applied.Load()
	n, check, checkTerm, urgent := len(logs), uint64(0), uint64(0), false
	for i, l := range logs {
		if l.Index <= applied {
			continue
		}
		applied = l.Index
		if l.Type != raft.LogCommand {
			continue
		}
		cmd, err := DecodeCommand(l.Data)
		if errors.Is(err, ErrUnknownCommand) {
			panic(tooNew(l, f.maxLevel(), err))
		}
		if err != nil {
			panic(fmt.Sprintf("docket fsm: log index %d: %v", l.Index, err))
		}
		if need := CommandLevel(cmd); need > f.maxLevel() {
			// What an older build does on meeting this entry: stop, rather
			// than apply what it does not know or skip it and diverge.
			panic(tooNew(l, f.maxLevel(), fmt.Errorf("%v needs feature level %d", cmd.GetType(), need)))
		}
		if cmd.GetType() == pb.CommandType_COMMAND_TYPE_SET_FEATURE_LEVEL && cmd.GetSetFeatureLevel().GetLevel() > f.maxLevel() {
			panic(tooNew(l, f.maxLevel(), fmt.Errorf("the cluster enabled feature level %d", cmd.GetSetFeatureLevel().GetLevel())))
		}
		res, err := tx.apply(l.Index, cmd)
		if storage.IsDamage(err) {
			return f.damagedSegment(err, results)
		}
		if err != nil {
			panic(fmt.Sprintf("docket fsm: apply index %d (%v): %v", l.Index, cmd.GetType(), err))
		}
		results[i] = res
		if cmd.GetType() == pb.CommandType_COMMAND_TYPE_CHECK && res.GetErrorCode() == pb.Code_CODE_OK {
			n, check, checkTerm, urgent = i+1, l.Index, l.Term, cmd.GetCheck().GetUrgent()
			break
		}
	}
	if applied == f.applied.Load() {
		// Nothing new: the deferred close drops a batch of its own, and a
		// window's stays open.
		viewed, committed, closed = true, true, windowed
		return n
	}
	if planted("reaper-on-followers") {
		if err := tx.plantReap(); err != nil {
			panic(fmt.Sprintf("docket fsm: planted reap at %d: %v", applied, err))
		}
	}
	if err := tx.finish(applied); storage.IsDamage(err) {
		return f.damagedSegment(err, results)
	} else if err != nil {
		panic(fmt.Sprintf("docket fsm: finish batch at %d: %v", applied, err))
	}
	// No sync and no WAL (storage.OpenDB): the batch reaches disk with a
	// memtable flush, and until then the Raft log holds it (Persist).
	if windowed {
		f.pend.entries += n
		if check != 0 || f.windowFull(f.pend) {
			f.checkpointLocked() // a Check hashes Pebble at its index
		}
		closed = true // committed and closed, or still the window's
	} else {
		f.written.Add(uint64(b.Len()))
		if err := b.Commit(pebble.NoSync); err != nil {
			panic(fmt.Sprintf("docket fsm: commit batch at %d: %v", applied, err))
		}
	}
	committed = true
	// Before the applied index and the observer: a claim whose entry this
	// batch applied, and a waiter it wakes, see the view with its effects.
	f.claims.applied(tx)
	f.claims.setKeyed(keyed)
	viewed = true
	unlockReady()
	if !windowed {
		closed = true
		if err := b.Close(); err != nil {
			panic(fmt.Sprintf("docket fsm: close batch at %d: %v", applied, err))
		}
	}
	f.applied.Store(applied)
	f.now.Store(tx.now)
	if tx.feature > f.feature.Load() {
		f.feature.Store(tx.feature)
	}
	if tx.clusterID != "" {
		f.cluster.Store(&tx.clusterID)
	}
	if fn := f.observer.Load(); fn != nil && (len(tx.ev.Pending) > 0 || len(tx.ev.Finished) > 0 || len(tx.ev.Freed) > 0) {
		tx.ev.Index = applied
		(*fn)(tx.ev)
	}
	f.emitChecks(tx.checks, check, checkTerm, urgent)
	return n
}

// newApplyBatch makes the batch of one applySegment; a test swaps it to
// see the batch a panicking apply leaves behind.
var newApplyBatch = (*pebble.DB).NewIndexedBatch
