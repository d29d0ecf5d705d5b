package health

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/storage"
)

// ErrLogWrite means this node could not write its Raft log (a full disk,
// an I/O error). A leader that meets it steps down (raft's dispatchLogs);
// Propose then answers ErrLeadershipLost, because the failed append may
// still be on disk (cluster/DESIGN.md, "Health").
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

// LogGuard sits between Raft and the LogCache. It tags a failed append
// with ErrLogWrite (the LogCache flattens the disk's error to text, so
// Propose could not tell it from any other) and keeps health's view of
// whether the log can be written: failing from a failed append until the
// next one succeeds.
type LogGuard struct {
	raft.LogStore
	failing episode
}

// NewLogGuard wraps s; a failed append is logged to log.
func NewLogGuard(s raft.LogStore, log *slog.Logger) *LogGuard {
	return &LogGuard{LogStore: s, failing: episode{log: log, what: "raft log write failed"}}
}

func (g *LogGuard) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

// IsMonotonic passes the wrapped store's answer on (raft.MonotonicLogStore),
// so the guard changes nothing about how Raft treats the log.
func (g *LogGuard) IsMonotonic() bool {
	m, ok := g.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (g *LogGuard) StoreLogs(logs []*raft.Log) error {
	if err := g.LogStore.StoreLogs(logs); err != nil {
		g.failing.fail(time.Now(), err.Error())
		return fmt.Errorf("%w: %w", ErrLogWrite, err)
	}
	g.failing.end(time.Now())
	return nil
}

// Tracker is what a Node knows about its own ability to write and apply.
// Pebble's reports arrive through onDiskEvent, the log's through the
// LogGuard, and the apply watcher (watchApply) checks that committed
// entries get applied.
type Tracker struct {
	log   *slog.Logger
	bound time.Duration // Config.ApplyLagBound
	// Logs is the Raft log's guard, set once the stores are open.
	Logs     *LogGuard
	pebble   episode // background errors
	diskSlow episode // logged only; see cluster/DESIGN.md

	mu         sync.Mutex
	stallSince time.Time // zero when Pebble is not stalling writes
	stallWhy   string

	// Counts of Pebble's reports since start, for the metrics.
	BgErrors, Stalls, SlowWrites atomic.Uint64

	// ApplyStuck says why apply is stuck, nil when it is not; Halted
	// why Raft was shut down for good, nil while it runs.
	ApplyStuck, Halted atomic.Pointer[string]
}

func New(log *slog.Logger, bound time.Duration) *Tracker {
	return &Tracker{
		log:      log,
		bound:    bound,
		pebble:   episode{log: log, what: "pebble background error"},
		diskSlow: episode{log: log, what: "pebble disk slow"},
	}
}

// OnDiskEvent receives Pebble's reports (fsm.Options.OnDiskEvent, made by storage). It runs
// on Pebble's goroutines and only records.
func (h *Tracker) OnDiskEvent(ev storage.DiskEvent) {
	now := time.Now()
	switch ev.Kind {
	case storage.DiskBackgroundError:
		h.BgErrors.Add(1)
		h.pebble.fail(now, ev.Detail)
	case storage.DiskJobDone:
		// The episode ends only when no error follows the success for a
		// moment (expire): while flushes fail, a compaction that happens
		// to succeed between them would otherwise open and close it over
		// and over, and log each time.
		h.pebble.succeeded()
	case storage.DiskSlow:
		h.SlowWrites.Add(1)
		h.diskSlow.fail(now, ev.Detail)
	case storage.DiskWriteStallBegin:
		h.Stalls.Add(1)
		h.mu.Lock()
		h.stallSince, h.stallWhy = now, ev.Detail
		h.mu.Unlock()
	case storage.DiskWriteStallEnd:
		h.mu.Lock()
		h.stallSince = time.Time{}
		h.mu.Unlock()
	}
}

// Problems lists what keeps the node from serving, "" entries left out.
func (h *Tracker) Problems(now time.Time) []string {
	var ps []string
	add := func(p string) {
		if p != "" {
			ps = append(ps, p)
		}
	}
	if h.Logs != nil {
		add(h.Logs.failing.problem())
	}
	add(h.pebble.problem())
	h.mu.Lock()
	if !h.stallSince.IsZero() && now.Sub(h.stallSince) > h.bound {
		add(fmt.Sprintf("pebble write stall since %s: %s", h.stallSince.UTC().Format(time.RFC3339), h.stallWhy))
	}
	h.mu.Unlock()
	if p := h.ApplyStuck.Load(); p != nil {
		add(*p)
	}
	if p := h.Halted.Load(); p != nil {
		add(*p)
	}
	return ps
}

// Expire ends the Pebble episodes that went quiet: background errors
// pebbleQuiet after a success with no error since, or pebbleErrorWindow
// after the last error; slow-disk reports pebbleErrorWindow after the
// last.
func (h *Tracker) Expire(now time.Time) {
	h.pebble.expire(now, pebbleQuiet, pebbleErrorWindow)
	h.diskSlow.expire(now, pebbleErrorWindow, pebbleErrorWindow)
}
