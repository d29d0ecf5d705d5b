package check

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

var (
	// ErrDiverged means this node's keyspace differed from the hash a
	// majority of voters recorded at a consistency check. The node serves
	// nothing, its Raft is shut down so it can never lead or vote, and it
	// refuses to start again until its data dir is wiped (cluster/DESIGN.md, "Repairing a node").
	ErrDiverged = errors.New("keyspace diverged from the majority")
	// ErrAwaitingCheck means this node started from existing data and no
	// consistency check has passed on it yet: its keyspace may be damaged
	// (a corrupt Pebble MANIFEST opens without error), so it serves nothing
	// until one does.
	ErrAwaitingCheck = errors.New("awaiting a consistency check")
)

// Check states, as StatusResponse.consistency.status shows them.
const (
	StateOK       = "ok"
	StateAwaiting = "awaiting"
	StateDiverged = "diverged"
)

// Host is what the checker needs from its node: to propose, to know the
// term and the voters, to ask a voter for its hash, and to take the node
// out of Raft when it diverged.
type Host interface {
	// Propose runs a command the leader decided on, bounded in time, and
	// turns a whole-command rejection into an error.
	Propose(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error)
	EnabledLevel() uint32
	// Term is Raft's current term on this node, 0 before Raft runs.
	Term() uint64
	// Voters lists the voters of the latest configuration.
	Voters() []string
	// PeerHash is voter id's hash at a check index, "" when it has none
	// yet or cannot be reached.
	PeerHash(ctx context.Context, id string, index uint64) string
	// LeaveRaft hands leadership over and shuts Raft down, keeping the
	// stores open so Status can still say why.
	LeaveRaft()
}

// Config tunes the checker.
type Config struct {
	ID      string // this node's id
	DataDir string // where the DIVERGED marker goes
	Log     *slog.Logger
	// CheckInterval is the time between periodic checks; negative: none.
	CheckInterval time.Duration
	// CheckTimeout bounds the wait for the voters' hashes after the
	// leader's own is done.
	CheckTimeout time.Duration
	// CheckRate paces hashing and scrubbing, in bytes a second; 0: full
	// speed.
	CheckRate int64
	// ScrubInterval is the time between scrubs; negative: none.
	ScrubInterval time.Duration
}

// divergedMarker is the file in the data dir that keeps a diverged node
// from starting again until an operator wipes the dir.
const divergedMarker = "DIVERGED"

// keptHashes bounds how many own hashes a node remembers: a result is
// recorded within one check of its Check, so a few suffice.
const keptHashes = 8

// checkPokeGap is the least time between a check and one that a voter
// awaiting a check asked for: a node that takes longer than that to hash
// must not make the leader check back to back.
const checkPokeGap = 5 * time.Second

// checkRetry is how soon the leader tries again when a check could not
// start (a voter not yet known to apply Check entries, or no leadership).
const checkRetry = time.Second

// checkIdleFactor bounds the share of time periodic checks keep the voters
// hashing: after a check that took d, the next periodic one waits at
// least checkIdleFactor·d, so hashing takes at most a tenth of the time
// however large the keyspace. At a million tasks a paced hash takes 48 s
// and, while it runs, claims have a p99 1.4-2x the empty queue's (+1-2 ms;
// none between checks: BENCHMARKS.md); hashing more slowly did
// not lower that, only stretched it. So the duty cycle, not the rate, is
// the knob: a check every 8 minutes at that size, and every CheckInterval
// on a small keyspace. CockroachDB's consistency checker, at the same 8
// MiB/s, runs once a day. A check someone waits on is not held back by
// this.
const checkIdleFactor = 9

// nextCheckWait is how long the leader waits after a check that took
// took before the next periodic one.
func nextCheckWait(interval, took time.Duration) time.Duration {
	return max(interval, checkIdleFactor*took)
}

// ErrChecksUnsupported means a voter has not shown that its build applies
// Check entries; proposing one would stop it (unknown command type).
var ErrChecksUnsupported = errors.New("not every voter is known to support consistency checks")

// errCheckNotRun marks a checkOnce that failed before, or while,
// proposing its Check entry, so that an urgent check stays urgent for the
// retry (at worst, an entry that did apply is followed by one more
// full-speed check).
var errCheckNotRun = errors.New("check did not run")

// checkPoll is how often the leader re-asks voters that have not reported
// their hash yet.
const checkPoll = 50 * time.Millisecond

// Checker is the node's side of the consistency check: it hashes the
// snapshots the FSM hands out at Check entries, compares them with the
// CheckResult entries, and turns a mismatch into a stop.
type Checker struct {
	h   Host
	cfg Config
	log *slog.Logger
	// ctx ends with Close, and bounds the hashes; wg waits for them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	state   string
	detail  string
	hashes  map[uint64]*ownHash
	results map[uint64]*pb.CheckResultCmd // results waiting for their own hash
	last    *pb.CheckResultCmd            // last result applied
	lastOwn string                        // own hash at last.CheckIndex, "" if unknown
	hashing bool                          // one hash at a time
	// hashingAt is the check index of the hash under way (0: none), and
	// stopHash ends it.
	hashingAt uint64
	stopHash  context.CancelFunc
	// hashingFull says the hash under way runs at full speed (its check
	// was urgent, or this node awaited a check when it began): no later
	// check may stop it, or a slow restarted voter poked into urgent
	// checks back to back would never finish one.
	hashingFull bool

	wake chan struct{} // asks the leader's check loop for a check now
}

type ownHash struct {
	done chan struct{} // closed when hash and err are set
	hash string
	err  error
}

func New(ctx context.Context, h Host, cfg Config, restarted bool) *Checker {
	c := &Checker{h: h, cfg: cfg, log: cfg.Log, state: StateOK, hashes: map[uint64]*ownHash{}, results: map[uint64]*pb.CheckResultCmd{}, wake: make(chan struct{}, 1)}
	if restarted {
		c.state, c.detail = StateAwaiting, "started from existing data; no check has passed on it yet"
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	return c
}

// Err is nil when the node may serve: nil, ErrAwaitingCheck after a
// restart until a consistency check passes on it, or an error wrapping
// ErrDiverged once a check found its keyspace different from the
// majority's.
func (c *Checker) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case StateAwaiting:
		return ErrAwaitingCheck
	case StateDiverged:
		return fmt.Errorf("%w: %s", ErrDiverged, c.detail)
	}
	return nil
}

// Observe receives the FSM's check entries on the apply goroutine; it
// only records and starts goroutines.
func (c *Checker) Observe(ev fsm.CheckEvent) {
	if ev.View != nil {
		if c.stale(ev.Term) {
			// A check of an earlier term: its leader's collection ended
			// with that term, so no one waits for this hash. A restarted
			// voter replays such checks from its log, and hashing one at
			// full speed made it skip the new leader's urgent check, which
			// then waited out CheckTimeout (30 s without service).
			ev.View.Release()
			return
		}
		c.startHash(ev.Index, ev.View, ev.Urgent)
		return
	}
	res := ev.Result
	c.mu.Lock()
	c.last, c.lastOwn = res, ""
	h := c.hashes[res.GetCheckIndex()]
	if h == nil {
		c.mu.Unlock()
		return // not hashed here (restored from a snapshot, restarted, or busy): nothing to compare
	}
	select {
	case <-h.done:
		c.mu.Unlock()
		c.compare(res, h)
	default:
		c.results[res.GetCheckIndex()] = res
		c.mu.Unlock()
	}
}

// startHash hashes view on its own goroutine. A check that arrives while
// the previous hash still runs is skipped: this node then simply has no
// hash for it, and the next check covers it. An urgent check (its
// CheckCmd says so: a new leader's first, or one a restarted voter asked
// for) runs at full speed on every voter, and a paced hash under way gives
// way to it, since a paced hash of a large keyspace runs for most of
// CheckInterval and a restarted voter waits on the urgent one; a
// full-speed hash under way does not (hashAdmission). Before the leader
// said so in the entry, only its own hash knew a check was urgent, and in
// a 5-node cluster the majority it needs waited on a third voter's paced
// hash.
func (c *Checker) startHash(index uint64, view *fsm.CheckView, urgent bool) {
	c.mu.Lock()
	start, replace := hashAdmission(c.hashing, c.hashingFull, urgent)
	if c.state == StateDiverged || !start {
		c.mu.Unlock()
		view.Release()
		return
	}
	if replace {
		c.stopHash() // its check goes without this node's hash
	}
	ctx, stop := context.WithCancel(c.ctx)
	c.hashing, c.hashingAt, c.stopHash = true, index, stop
	c.hashingFull = urgent || c.state == StateAwaiting
	h := &ownHash{done: make(chan struct{})}
	c.hashes[index] = h
	for i := range c.hashes {
		if i+keptHashes <= index {
			delete(c.hashes, i)
			delete(c.results, i)
		}
	}
	c.mu.Unlock()
	// Raft's apply goroutine, the only caller, ends before stop waits on
	// wg, so this Add never races the Wait.
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer stop()
		start := time.Now()
		hash, err := view.HashChunked(func(read int64) error {
			return pace(ctx, c.rate(urgent), start, read)
		})
		view.Release()
		c.mu.Lock()
		h.hash, h.err = hash, err
		if c.hashingAt == index { // not replaced by an urgent check
			c.hashing, c.hashingAt, c.stopHash, c.hashingFull = false, 0, nil, false
		}
		close(h.done)
		res := c.results[index]
		delete(c.results, index)
		c.mu.Unlock()
		switch {
		case err == nil:
		case ctx.Err() != nil && c.ctx.Err() == nil:
			c.log.Debug("consistency check: hash gave way to an urgent check", "check_index", index)
		default:
			c.log.Warn("consistency check: hashing failed", "check_index", index, "err", err)
		}
		if res != nil {
			c.compare(res, h)
		}
	}()
}

// stale reports whether a Check entry of term was proposed by a leader
// whose term is over on this node.
func (c *Checker) stale(term uint64) bool {
	return term < c.h.Term()
}

// hashAdmission decides what a check arriving at a voter does: start a
// hash, and whether it stops the one under way. Only a paced hash gives
// way, and only to an urgent check; otherwise the check is skipped while
// a hash runs.
func hashAdmission(hashing, runningFull, urgent bool) (start, replace bool) {
	switch {
	case !hashing:
		return true, false
	case urgent && !runningFull:
		return true, true
	default:
		return false, false
	}
}

// rate is the pace of this node's hashing now, in bytes a second: the
// configured CheckRate, or full speed (0) for an urgent check or while
// this node awaits a check (it serves nothing until one passes on it).
func (c *Checker) rate(urgent bool) int64 {
	if urgent || errors.Is(c.Err(), ErrAwaitingCheck) {
		return 0
	}
	return c.cfg.CheckRate
}

// pace sleeps until read bytes since start are within rate bytes a second
// (0 or less: no wait), or ctx ends.
func pace(ctx context.Context, rate int64, start time.Time, read int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if rate <= 0 {
		return nil
	}
	wait := time.Until(start.Add(time.Duration(float64(read) / float64(rate) * float64(time.Second))))
	if wait > 0 && !replica.Sleep(ctx, wait) {
		return ctx.Err()
	}
	return nil
}

// HashPending reports whether this node is still hashing its keyspace at
// a check index.
func (c *Checker) HashPending(index uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hashing && c.hashingAt == index
}

// HashAt returns this node's hash at a check index, "" when unknown or
// still being computed.
func (c *Checker) HashAt(index uint64) string {
	c.mu.Lock()
	h := c.hashes[index]
	c.mu.Unlock()
	if h == nil {
		return ""
	}
	select {
	case <-h.done:
		return h.hash
	default:
		return ""
	}
}

// compare acts on a recorded result against this node's own hash.
func (c *Checker) compare(res *pb.CheckResultCmd, h *ownHash) {
	if h.err != nil {
		return // could not hash: neither pass nor fail on it
	}
	c.mu.Lock()
	if c.last == res {
		c.lastOwn = h.hash
	}
	if h.hash == res.GetHash() {
		if c.state == StateAwaiting {
			c.log.Info("consistency check passed: serving", "check_index", res.GetCheckIndex())
			c.state, c.detail = StateOK, ""
		}
		c.mu.Unlock()
		return
	}
	if c.state == StateDiverged {
		c.mu.Unlock()
		return
	}
	c.state = StateDiverged
	c.detail = fmt.Sprintf("at check index %d this node's keyspace hash is %s, the majority's (%d of %d voters) is %s",
		res.GetCheckIndex(), h.hash, res.GetAgreeing(), res.GetVoters(), res.GetHash())
	detail := c.detail
	c.mu.Unlock()
	c.log.Error("CONSISTENCY CHECK FAILED: this node's keyspace diverged from the majority; it stops serving and shuts Raft down. "+
		"Repair: stop it, wipe its data dir and let it rejoin (cluster/DESIGN.md)",
		"check_index", res.GetCheckIndex(), "own_hash", h.hash, "majority_hash", res.GetHash())
	if err := writeMarker(c.cfg.DataDir, detail); err != nil {
		c.log.Error("writing the diverged marker failed", "err", err)
	}
	if c.ctx.Err() != nil {
		return // the node is stopping, and stops Raft itself
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.h.LeaveRaft()
	}()
}

// setDamaged marks the node diverged for damage found on its own disk
// (scrub.go): it serves nothing from then on. It reports whether this
// call marked it, so only one caller takes the node out of Raft.
func (c *Checker) setDamaged(detail string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == StateDiverged {
		return false
	}
	c.state, c.detail = StateDiverged, detail
	return true
}

// Status is the consistency part of StatusResponse.
func (c *Checker) Status() *pb.ConsistencyCheck {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := &pb.ConsistencyCheck{Status: c.state, Detail: c.detail}
	if c.last != nil {
		cs.Index, cs.MajorityHash, cs.OwnHash = c.last.GetCheckIndex(), c.last.GetHash(), c.lastOwn
	}
	return cs
}

// writeMarker records in the data dir that the node diverged.
func writeMarker(dir, detail string) error {
	return os.WriteFile(filepath.Join(dir, divergedMarker), []byte(detail+"\n"), 0o644)
}

// CheckMarker refuses to start a node that diverged and was not repaired.
func CheckMarker(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, divergedMarker))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", divergedMarker, err)
	}
	return fmt.Errorf("%w: %s(%s). Wipe the data dir %s and let the node rejoin (see cluster/DESIGN.md, \"Repairing a node\")",
		ErrDiverged, b, filepath.Join(dir, divergedMarker), dir)
}

// Close stops the hashes under way and waits for them.
func (c *Checker) Close() {
	c.cancel()
	c.wg.Wait()
}

// Hashing reports whether a hash of this node's keyspace is under way.
func (c *Checker) Hashing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hashing
}

// Override sets the check state, for tests of what reads it (metrics,
// health); the returned function restores the previous state.
func (c *Checker) Override(state string) (restore func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.state
	c.state = state
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.state = was
	}
}
