package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/membership"
	"github.com/dockethq/docket/storage"
)

// ErrLogWrite means this node could not write its Raft log (a full disk,
// an I/O error). A leader that meets it steps down (raft's dispatchLogs);
// Propose then answers ErrLeadershipLost, because the failed append may
// still be on disk (DESIGN.md).
var ErrLogWrite = errors.New("raft log write failed")

const (
	// pebbleErrorWindow is how long a Pebble background error keeps
	// health NOT_SERVING when no flush or compaction succeeds after it.
	pebbleErrorWindow = 30 * time.Second
	// pebbleQuiet is how long after a successful flush or compaction no
	// new background error may come for the episode to end.
	pebbleQuiet = time.Second
	// repeatLogEvery is how often a failure that goes on is logged again
	// (with how often it recurred); it is also logged when it starts and
	// when it ends. Pebble retries a failed flush at once, and logging
	// each retry wrote 15,000 lines in 8 s (Test_FollowerDiskFullIsUnhealthyAndQuiet).
	repeatLogEvery = 30 * time.Second
)

// episode is a failure that starts, may repeat, and ends. It logs only
// those changes, and once per repeatLogEvery while it lasts.
type episode struct {
	log  *slog.Logger
	what string // "raft log write failed", ...

	mu        sync.Mutex
	active    bool
	since     time.Time
	last      time.Time // latest occurrence
	lastLog   time.Time
	repeats   int  // occurrences since lastLog
	okAfter   bool // a success came after the latest occurrence
	lastError string
}

func (e *episode) fail(now time.Time, detail string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.last, e.lastError, e.okAfter = now, detail, false
	if !e.active {
		e.active, e.since, e.lastLog, e.repeats = true, now, now, 0
		e.log.Error(e.what, "err", detail)
		return
	}
	e.repeats++
	if now.Sub(e.lastLog) >= repeatLogEvery {
		e.log.Warn(e.what+" (continues)", "err", detail, "repeats", e.repeats, "since", e.since)
		e.lastLog, e.repeats = now, 0
	}
}

// end closes the episode, if one is open.
func (e *episode) end(now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.active {
		return
	}
	e.active = false
	e.log.Info(e.what+" (over)", "lasted", now.Sub(e.since).Round(time.Millisecond), "last_err", e.lastError)
}

// succeeded records that the failing operation worked once since the
// latest failure; expire then ends the episode once it stays quiet.
func (e *episode) succeeded() {
	e.mu.Lock()
	e.okAfter = e.active
	e.mu.Unlock()
}

// expire ends the episode when it has not recurred for window, or for
// quiet after a success.
func (e *episode) expire(now time.Time, quiet, window time.Duration) {
	e.mu.Lock()
	since := now.Sub(e.last)
	stale := e.active && (since >= window || e.okAfter && since >= quiet)
	e.mu.Unlock()
	if stale {
		e.end(now)
	}
}

// problem describes the open episode, or "".
func (e *episode) problem() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.active {
		return ""
	}
	return fmt.Sprintf("%s since %s: %s", e.what, e.since.UTC().Format(time.RFC3339), e.lastError)
}

// logGuard sits between Raft and the LogCache. It tags a failed append
// with ErrLogWrite (the LogCache flattens the disk's error to text, so
// Propose could not tell it from any other) and keeps health's view of
// whether the log can be written: failing from a failed append until the
// next one succeeds.
type logGuard struct {
	raft.LogStore
	failing episode
}

func newLogGuard(s raft.LogStore, log *slog.Logger) *logGuard {
	return &logGuard{LogStore: s, failing: episode{log: log, what: "raft log write failed"}}
}

func (g *logGuard) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

// IsMonotonic passes the wrapped store's answer on (raft.MonotonicLogStore),
// so the guard changes nothing about how Raft treats the log.
func (g *logGuard) IsMonotonic() bool {
	m, ok := g.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (g *logGuard) StoreLogs(logs []*raft.Log) error {
	if err := g.LogStore.StoreLogs(logs); err != nil {
		g.failing.fail(time.Now(), err.Error())
		return fmt.Errorf("%w: %w", ErrLogWrite, err)
	}
	g.failing.end(time.Now())
	return nil
}

// health is what a Node knows about its own ability to write and apply.
// Pebble's reports arrive through onDiskEvent, the log's through the
// logGuard, and the apply watcher (watchApply) checks that committed
// entries get applied.
type health struct {
	log      *slog.Logger
	bound    time.Duration // Config.ApplyLagBound
	logs     *logGuard     // nil until the stores are open
	pebble   episode       // background errors
	diskSlow episode       // logged only; see DESIGN.md

	mu         sync.Mutex
	stallSince time.Time // zero when Pebble is not stalling writes
	stallWhy   string

	// Counts of Pebble's reports since start, for the metrics.
	bgErrors, stalls, slowWrites atomic.Uint64

	applyStuck atomic.Pointer[string]
	halted     atomic.Pointer[string] // set once Raft was shut down for good
}

func newHealth(log *slog.Logger, bound time.Duration) *health {
	return &health{
		log:      log,
		bound:    bound,
		pebble:   episode{log: log, what: "pebble background error"},
		diskSlow: episode{log: log, what: "pebble disk slow"},
	}
}

// onDiskEvent receives Pebble's reports (fsm.Options.OnDiskEvent, made by storage). It runs
// on Pebble's goroutines and only records.
func (h *health) onDiskEvent(ev storage.DiskEvent) {
	now := time.Now()
	switch ev.Kind {
	case storage.DiskBackgroundError:
		h.bgErrors.Add(1)
		h.pebble.fail(now, ev.Detail)
	case storage.DiskJobDone:
		// The episode ends only when no error follows the success for a
		// moment (expire): while flushes fail, a compaction that happens
		// to succeed between them would otherwise open and close it over
		// and over, and log each time.
		h.pebble.succeeded()
	case storage.DiskSlow:
		h.slowWrites.Add(1)
		h.diskSlow.fail(now, ev.Detail)
	case storage.DiskWriteStallBegin:
		h.stalls.Add(1)
		h.mu.Lock()
		h.stallSince, h.stallWhy = now, ev.Detail
		h.mu.Unlock()
	case storage.DiskWriteStallEnd:
		h.mu.Lock()
		h.stallSince = time.Time{}
		h.mu.Unlock()
	}
}

// problems lists what keeps the node from serving, "" entries left out.
func (h *health) problems(now time.Time) []string {
	var ps []string
	add := func(p string) {
		if p != "" {
			ps = append(ps, p)
		}
	}
	if h.logs != nil {
		add(h.logs.failing.problem())
	}
	add(h.pebble.problem())
	h.mu.Lock()
	if !h.stallSince.IsZero() && now.Sub(h.stallSince) > h.bound {
		add(fmt.Sprintf("pebble write stall since %s: %s", h.stallSince.UTC().Format(time.RFC3339), h.stallWhy))
	}
	h.mu.Unlock()
	if p := h.applyStuck.Load(); p != nil {
		add(*p)
	}
	if p := h.halted.Load(); p != nil {
		add(*p)
	}
	return ps
}

// HealthProblems lists why this node should not serve, empty when it
// can: its Raft log cannot be written, Pebble reports background errors
// (until a flush or compaction succeeds and no error follows for
// pebbleQuiet, or pebbleErrorWindow passes without one), Pebble
// has stalled writes for longer than ApplyLagBound, or an entry committed
// longer than ApplyLagBound ago is not applied, or its log holds a damaged
// entry (LogFault). transport turns a non-empty answer into NOT_SERVING.
func (n *Node) HealthProblems() []string {
	ps := n.health.problems(time.Now())
	if err := n.LogFault(); err != nil {
		ps = append(ps, "raft log damaged: "+err.Error())
	}
	return ps
}

// applyWatch is the apply watcher's state: the commit index it waits to
// see applied, and since when.
type applyWatch struct {
	target uint64
	since  time.Time
	stuck  bool
}

// watchApply checks, several times per ApplyLagBound, that the entries
// this node knows to be committed get applied, and ends stale episodes.
// It is the only goroutine that sets applyStuck.
func (n *Node) watchApply() {
	defer n.wg.Done()
	every := min(max(n.cfg.ApplyLagBound/5, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	var w applyWatch
	for {
		select {
		case now := <-t.C:
			n.checkApply(&w, now)
			n.health.pebble.expire(now, pebbleQuiet, pebbleErrorWindow)
			n.health.diskSlow.expire(now, pebbleErrorWindow, pebbleErrorWindow)
		case <-n.ctx.Done():
			return
		}
	}
}

func (n *Node) checkApply(w *applyWatch, now time.Time) {
	if w.target != 0 && n.appliedThrough(w.target) {
		if w.stuck {
			n.log.Info("apply caught up", "index", w.target, "stuck_for", now.Sub(w.since).Round(time.Millisecond))
			n.health.applyStuck.Store(nil)
		}
		*w = applyWatch{}
	}
	if w.target == 0 {
		if c := n.raft.CommitIndex(); !n.appliedThrough(c) {
			w.target, w.since = c, now
		}
		return
	}
	if !w.stuck && now.Sub(w.since) > n.cfg.ApplyLagBound {
		w.stuck = true
		applied := n.fsm.AppliedIndex()
		msg := fmt.Sprintf("apply stuck: index %d committed more than %v ago is not applied (applied %d, commit %d)",
			w.target, n.cfg.ApplyLagBound, applied, n.raft.CommitIndex())
		n.health.applyStuck.Store(&msg)
		n.log.Error("apply stuck", "waiting_for", w.target, "applied", applied, "bound", n.cfg.ApplyLagBound)
		if n.IsLeader() {
			n.wg.Add(1)
			go n.leaveStuckLeadership(w.target, applied)
		}
	}
}

// leaveStuckLeadership moves leadership away from this node because its
// apply is stuck (a full disk stalls Pebble). A leader that cannot apply
// answers no Propose, and Raft keeps it leader: its replication goroutines
// still send heartbeats, and once its apply queue is full its main loop
// blocks, so it can neither commit nor notice anything. It first asks Raft
// to transfer leadership. If that fails and apply made no progress
// meanwhile, it shuts Raft down, without waiting (the shutdown waits for
// the stuck apply): the heartbeats stop and the others elect. The node
// then stays down, NOT_SERVING, until it is restarted (DESIGN.md).
func (n *Node) leaveStuckLeadership(target, applied uint64) {
	defer n.wg.Done()
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyLagBound)
	err := membership.WaitFuture(ctx, n.raft.LeadershipTransfer())
	cancel()
	switch {
	case n.ctx.Err() != nil:
		return
	case err == nil || !n.IsLeader():
		n.log.Warn("apply stuck: leadership handed over", "transfer_err", err)
		return
	case n.fsm.AppliedIndex() != applied || n.appliedThrough(target):
		n.log.Warn("apply stuck: leadership transfer failed, but apply is moving; staying leader", "err", err)
		return
	case n.voterCount() < 2:
		// Alone, no one else could lead; a Raft that stays up recovers
		// by itself once the disk has space.
		n.log.Error("apply stuck on the only voter: staying leader", "err", err)
		return
	}
	msg := fmt.Sprintf("raft shut down: apply stuck at index %d while leading and leadership transfer failed (%v); restart the node once its disk has space", applied, err)
	n.health.halted.Store(&msg)
	n.log.Error("apply stuck: shutting Raft down so that another node can lead", "applied", applied, "transfer_err", err)
	n.shutdownRaft() // not waited for: it waits for the stuck apply
	// Raft may not tell NotifyCh while shutting down; stop the leader
	// loops, which could only fail from now on.
	select {
	case n.notify <- false:
	default:
	}
}
