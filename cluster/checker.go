package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

var (
	// ErrDiverged means this node's keyspace differed from the hash a
	// majority of voters recorded at a consistency check. The node serves
	// nothing, its Raft is shut down so it can never lead or vote, and it
	// refuses to start again until its data dir is wiped (DESIGN.md, "Repairing a node").
	ErrDiverged = errors.New("keyspace diverged from the majority")
	// ErrAwaitingCheck means this node started from existing data and no
	// consistency check has passed on it yet: its keyspace may be damaged
	// (a corrupt Pebble MANIFEST opens without error), so it serves nothing
	// until one does.
	ErrAwaitingCheck = errors.New("awaiting a consistency check")
)

// Check states, as StatusResponse.consistency.status shows them.
const (
	checkOK       = "ok"
	checkAwaiting = "awaiting"
	checkDiverged = "diverged"
)

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
// least checkIdleFactor·d, so hashing takes at most a quarter of the time
// however large the keyspace. With CheckInterval alone a paced hash of a
// million tasks (48 s) ran 44 % of the time, and claims at that backlog
// had a p99 1.6-2.5x the empty queue's while it ran (BENCHMARKS.md). A
// check someone waits on is not held back by this.
const checkIdleFactor = 3

// nextCheckWait is how long the leader waits after a check that took
// took before the next periodic one.
func nextCheckWait(interval, took time.Duration) time.Duration {
	return max(interval, checkIdleFactor*took)
}

// errChecksUnsupported means a voter has not shown that its build applies
// Check entries; proposing one would stop it (unknown command type).
var errChecksUnsupported = errors.New("not every voter is known to support consistency checks")

// errCheckNotRun marks a checkOnce that failed before, or while,
// proposing its Check entry, so that an urgent check stays urgent for the
// retry (at worst, an entry that did apply is followed by one more
// full-speed check).
var errCheckNotRun = errors.New("check did not run")

// checkPoll is how often the leader re-asks voters that have not reported
// their hash yet.
const checkPoll = 50 * time.Millisecond

// checker is the node's side of the consistency check: it hashes the
// snapshots the FSM hands out at Check entries, compares them with the
// CheckResult entries, and turns a mismatch into a stop.
type checker struct {
	n *Node

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

func newChecker(n *Node, restarted bool) *checker {
	c := &checker{n: n, state: checkOK, hashes: map[uint64]*ownHash{}, results: map[uint64]*pb.CheckResultCmd{}, wake: make(chan struct{}, 1)}
	if restarted {
		c.state, c.detail = checkAwaiting, "started from existing data; no check has passed on it yet"
	}
	return c
}

// err is nil when the node may serve.
func (c *checker) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case checkAwaiting:
		return ErrAwaitingCheck
	case checkDiverged:
		return fmt.Errorf("%w: %s", ErrDiverged, c.detail)
	}
	return nil
}

// observe receives the FSM's check entries on the apply goroutine; it
// only records and starts goroutines.
func (c *checker) observe(ev fsm.CheckEvent) {
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
func (c *checker) startHash(index uint64, view *fsm.CheckView, urgent bool) {
	c.mu.Lock()
	start, replace := hashAdmission(c.hashing, c.hashingFull, urgent)
	if c.state == checkDiverged || !start {
		c.mu.Unlock()
		view.Release()
		return
	}
	if replace {
		c.stopHash() // its check goes without this node's hash
	}
	ctx, stop := context.WithCancel(c.n.ctx)
	c.hashing, c.hashingAt, c.stopHash = true, index, stop
	c.hashingFull = urgent || c.state == checkAwaiting
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
	c.n.wg.Add(1)
	go func() {
		defer c.n.wg.Done()
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
		case ctx.Err() != nil && c.n.ctx.Err() == nil:
			c.n.log.Debug("consistency check: hash gave way to an urgent check", "check_index", index)
		default:
			c.n.log.Warn("consistency check: hashing failed", "check_index", index, "err", err)
		}
		if res != nil {
			c.compare(res, h)
		}
	}()
}

// stale reports whether a Check entry of term was proposed by a leader
// whose term is over on this node.
func (c *checker) stale(term uint64) bool {
	r := c.n.role.raft.Load()
	return r != nil && term < r.CurrentTerm()
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
func (c *checker) rate(urgent bool) int64 {
	if urgent || errors.Is(c.err(), ErrAwaitingCheck) {
		return 0
	}
	return c.n.cfg.CheckRate
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
	if wait > 0 && !sleepCtx(ctx, wait) {
		return ctx.Err()
	}
	return nil
}

// hashPending reports whether this node is still hashing its keyspace at
// a check index.
func (c *checker) hashPending(index uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hashing && c.hashingAt == index
}

// hashAt returns this node's hash at a check index, "" when unknown or
// still being computed.
func (c *checker) hashAt(index uint64) string {
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
func (c *checker) compare(res *pb.CheckResultCmd, h *ownHash) {
	if h.err != nil {
		return // could not hash: neither pass nor fail on it
	}
	c.mu.Lock()
	if c.last == res {
		c.lastOwn = h.hash
	}
	if h.hash == res.GetHash() {
		if c.state == checkAwaiting {
			c.n.log.Info("consistency check passed: serving", "check_index", res.GetCheckIndex())
			c.state, c.detail = checkOK, ""
		}
		c.mu.Unlock()
		return
	}
	if c.state == checkDiverged {
		c.mu.Unlock()
		return
	}
	c.state = checkDiverged
	c.detail = fmt.Sprintf("at check index %d this node's keyspace hash is %s, the majority's (%d of %d voters) is %s",
		res.GetCheckIndex(), h.hash, res.GetAgreeing(), res.GetVoters(), res.GetHash())
	detail := c.detail
	c.mu.Unlock()
	c.n.log.Error("CONSISTENCY CHECK FAILED: this node's keyspace diverged from the majority; it stops serving and shuts Raft down. "+
		"Repair: stop it, wipe its data dir and let it rejoin (cluster/DESIGN.md)",
		"check_index", res.GetCheckIndex(), "own_hash", h.hash, "majority_hash", res.GetHash())
	if err := writeMarker(c.n.cfg.DataDir, detail); err != nil {
		c.n.log.Error("writing the diverged marker failed", "err", err)
	}
	if c.n.ctx.Err() != nil {
		return // the node is stopping, and stops Raft itself
	}
	c.n.wg.Add(1)
	go func() {
		defer c.n.wg.Done()
		c.n.leaveRaft()
	}()
}

// setDamaged marks the node diverged for damage found on its own disk
// (scrub.go): it serves nothing from then on. It reports whether this
// call marked it, so only one caller takes the node out of Raft.
func (c *checker) setDamaged(detail string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == checkDiverged {
		return false
	}
	c.state, c.detail = checkDiverged, detail
	return true
}

// status is the consistency part of StatusResponse.
func (c *checker) status() *pb.ConsistencyCheck {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := &pb.ConsistencyCheck{Status: c.state, Detail: c.detail}
	if c.last != nil {
		cs.Index, cs.MajorityHash, cs.OwnHash = c.last.GetCheckIndex(), c.last.GetHash(), c.lastOwn
	}
	return cs
}

// poke asks the leader's check loop for a check soon (a voter reports it
// is awaiting one). It never blocks.
func (c *checker) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// leaveRaft takes a diverged node out of the cluster's life: a leader first
// hands leadership over, then Raft shuts down, so this node neither leads
// nor votes again. Its stores stay open so Status can still explain why.
func (n *Node) leaveRaft() {
	if n.IsLeader() && n.voterCount() > 1 {
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
		err := waitFuture(ctx, n.raft.LeadershipTransfer())
		cancel()
		if err != nil {
			n.log.Warn("diverged leader: leadership transfer failed; shutting Raft down anyway", "err", err)
		} else {
			n.log.Info("diverged leader: leadership transferred")
		}
	}
	// Through shutdownRaft, so that a Shutdown of the node meanwhile waits
	// for this one instead of getting raft's no-wait answer to a second
	// call and closing the stores under a Raft still running.
	if err := n.shutdownRaft().Error(); err != nil {
		n.log.Error("diverged node: raft shutdown", "err", err)
	}
	n.log.Error("diverged node: Raft is shut down; waiting for repair")
}

// CheckErr is nil when this node may serve: nil, ErrAwaitingCheck after a
// restart until a consistency check passes on it, or an error wrapping
// ErrDiverged once a check found its keyspace different from the majority's.
func (n *Node) CheckErr() error { return n.check.err() }

// CheckHash is this node's keyspace hash at a consistency check index,
// "" while it is being computed or when this node did not hash it.
func (n *Node) CheckHash(index uint64) string { return n.check.hashAt(index) }

// checkLoop runs the leader's consistency checks: one as soon as it leads
// (a node that just restarted may lead and must not serve from an unchecked
// keyspace for long), then every CheckInterval (longer after a long check:
// nextCheckWait), and sooner when a voter reports it awaits one.
func (n *Node) checkLoop(ctx context.Context) {
	if n.cfg.CheckInterval < 0 {
		return
	}
	urgent := true // a new leader's first check: a restarted node may wait on it
	for {
		wait := n.cfg.CheckInterval
		started := time.Now()
		err := n.checkOnce(ctx, urgent)
		if !errors.Is(err, errCheckNotRun) {
			urgent = false // taken by the Check entry; a check that did not run leaves it for the retry
		}
		switch {
		case err == nil:
			wait = nextCheckWait(wait, time.Since(started))
		case ctx.Err() != nil:
		case errors.Is(err, errChecksUnsupported):
			n.log.Debug("consistency check postponed", "err", err)
			wait = min(wait, checkRetry)
		case errors.Is(err, replica.ErrNotLeader), errors.Is(err, replica.ErrShutdown):
		default:
			n.log.Warn("consistency check failed to run", "err", err)
			wait = min(wait, checkRetry)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-n.check.wake:
			t.Stop()
			urgent = true
			if !sleepCtx(ctx, time.Until(started.Add(min(checkPokeGap, n.cfg.CheckInterval)))) {
				return
			}
		}
	}
}

// checkOnce proposes a Check, collects the voters' hashes at its index and
// records the majority's hash with a CheckResult. Without a majority (too
// few voters answered, or they disagree) nothing is recorded.
func (n *Node) checkOnce(ctx context.Context, urgent bool) error {
	if enabled := n.EnabledLevel(); enabled < fsm.LevelCheck {
		return fmt.Errorf("%w: %w: the cluster enabled feature level %d, checks need %d", errCheckNotRun, errChecksUnsupported, enabled, fsm.LevelCheck)
	}
	res, err := n.propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CHECK, Body: &pb.Command_Check{Check: &pb.CheckCmd{Urgent: urgent}}})
	if err != nil {
		return fmt.Errorf("%w: propose check: %w", errCheckNotRun, err)
	}
	index := res.GetIndex()
	voters := n.voterIDs()
	need := len(voters)/2 + 1
	hashes := n.collectHashes(ctx, index, voters, need)
	counts := map[string]int{}
	for _, h := range hashes {
		counts[h]++
	}
	var majority string
	for h, c := range counts {
		if c >= need {
			majority = h
		}
	}
	if majority == "" {
		if len(hashes) >= need {
			n.log.Error("consistency check: voters disagree and no majority agrees; nothing recorded", "check_index", index, "hashes", hashes)
		} else {
			n.log.Warn("consistency check: too few voters reported a hash", "check_index", index, "reported", len(hashes), "need", need)
		}
		return nil
	}
	var dissent []string
	for id, h := range hashes {
		if h != majority {
			dissent = append(dissent, id)
		}
	}
	sort.Strings(dissent)
	if len(dissent) > 0 {
		n.log.Error("consistency check: voters differ from the majority", "check_index", index, "diverged", dissent)
	}
	_, err = n.propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CHECK_RESULT, Body: &pb.Command_CheckResult{CheckResult: &pb.CheckResultCmd{
		CheckIndex: index, Hash: majority, Agreeing: uint32(counts[majority]), Voters: uint32(len(voters)),
	}}})
	if err != nil {
		return fmt.Errorf("propose check result at %d: %w", index, err)
	}
	return nil
}

// collectHashes asks every voter for its hash at index until a majority
// agrees, all answered, or CheckTimeout passes after the leader's own hash
// at index is done: the voters hash the same keyspace at the same pace
// (CheckRate), so a keyspace too large to hash within CheckTimeout still
// gets its check. It returns hashes by voter id. A voter that had not
// answered still compares its own hash when it applies the result.
func (n *Node) collectHashes(ctx context.Context, index uint64, voters []string, need int) map[string]string {
	deadline := time.Now().Add(n.cfg.CheckTimeout)
	got := map[string]string{}
	conns := map[string]*grpc.ClientConn{}
	defer func() {
		for _, c := range conns {
			_ = c.Close() // best effort; the check is over
		}
	}()
	for {
		counts := map[string]int{}
		for _, id := range voters {
			if _, ok := got[id]; !ok {
				if h := n.peerHash(ctx, conns, id, index); h != "" {
					got[id] = h
				}
			}
		}
		for _, h := range got {
			counts[h]++
			if counts[h] >= need {
				return got
			}
		}
		if len(got) == len(voters) {
			return got
		}
		if n.check.hashPending(index) {
			deadline = time.Now().Add(n.cfg.CheckTimeout)
		}
		if time.Now().After(deadline) || !sleepCtx(ctx, checkPoll) {
			return got
		}
	}
}

// peerHash is one voter's hash at index, "" when it has none yet or cannot
// be reached.
func (n *Node) peerHash(ctx context.Context, conns map[string]*grpc.ClientConn, id string, index uint64) string {
	if id == n.cfg.ID {
		return n.check.hashAt(index)
	}
	p, _ := n.peers.get(id)
	if p.GRPCAddr == "" {
		return ""
	}
	c, ok := conns[p.GRPCAddr]
	if !ok {
		var err error
		if c, err = grpc.NewClient(p.GRPCAddr, n.peerDialOptions()...); err != nil {
			return ""
		}
		conns[p.GRPCAddr] = c
	}
	rctx, cancel := context.WithTimeout(ctx, statusRPC)
	defer cancel()
	st, err := pb.NewClusterClient(c).Status(rctx, &pb.StatusRequest{CheckIndex: index})
	if err != nil || st.GetNodeId() != id {
		return ""
	}
	return st.GetCheckHash()
}

// voterIDs lists the voters of the latest configuration.
func (n *Node) voterIDs() []string {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var ids []string
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			ids = append(ids, string(s.ID))
		}
	}
	return ids
}

// writeMarker records in the data dir that the node diverged.
func writeMarker(dir, detail string) error {
	return os.WriteFile(filepath.Join(dir, divergedMarker), []byte(detail+"\n"), 0o644)
}

// checkMarker refuses to start a node that diverged and was not repaired.
func checkMarker(dir string) error {
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
