package jepsen

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Fault names.
const (
	FaultHalves   = "partition-halves"
	FaultLeader   = "partition-leader"
	FaultBridge   = "partition-bridge" // ring for 5+ nodes
	FaultOneWay   = "partition-oneway"
	FaultKill     = "kill"
	FaultPause    = "pause"
	FaultLoss     = "packet-loss"
	FaultClock    = "clock-offset"
	FaultLostData = "lost-unfsynced-writes"
	FaultCorrupt  = "corrupt-disk"
	// FaultMembership: a node leaves gracefully, its disk is wiped, and it
	// rejoins by gossip as a fresh member (membership.go).
	FaultMembership = "membership"
	// FaultRollingRestart: every node in turn gets SIGTERM and restarts.
	FaultRollingRestart = "rolling-restart"
	// FaultUpgrade: every node in turn is restarted on the current binary.
	// A scenario, not a random fault: the cluster must start on the older
	// binary (RunConfig.OldBin), and it happens once.
	FaultUpgrade = "rolling-upgrade"
)

// AllFaults is every fault the nemesis picks at random (rolling-upgrade is
// a scenario: RunConfig.OldBin).
var AllFaults = []string{FaultHalves, FaultLeader, FaultBridge, FaultOneWay, FaultKill, FaultPause, FaultLoss, FaultClock, FaultLostData, FaultCorrupt,
	FaultMembership, FaultRollingRestart}

// Window is what one applied fault hit.
type Window struct {
	Nodes  []string // node ids
	Detail string   // what exactly was done, for the report
}

// healFunc undoes one fault; outcome, if any, says how the fault ended
// (the corruption fault's verdict on the node).
type healFunc func(context.Context) (outcome string, err error)

// Injector applies and heals faults. The cluster's injector is the real
// one; a test gives one whose apply fails, which must fail the run.
type Injector interface {
	// Apply applies fault name, hitting only nodes b allows (overlap.go).
	// On error the fault may be half applied: the nemesis heals everything.
	Apply(ctx context.Context, name string, b Budget) (Window, healFunc, error)
	HealAll(ctx context.Context)
}

// Nemesis injects faults, at most Overlap at a time, and heals each.
type Nemesis struct {
	// Inject applies the faults; nil means the cluster's real injector.
	Inject  Injector
	C       *Cluster
	Rec     *Recorder
	Rand    *rand.Rand
	Self    string // this binary, re-executed in the control namespace to find the leader
	Faults  []string
	HoldMin time.Duration
	HoldMax time.Duration
	Quiet   time.Duration
	// Overlap is how many faults may hold at once (0 and 1: one); a second
	// fault starts only where overlapBudget allows it.
	Overlap int
	// First are faults applied once, alone, before the shuffled rounds of
	// Faults (the rolling upgrade of a scenario that starts on an older
	// binary).
	First []string
	// N is the cluster size when C is nil (tests with their own injector).
	N   int
	log *slog.Logger
	// budget is what the fault being applied may hit.
	budget Budget
	// detail is how the fault being applied chose its target (the leader
	// the cluster named, or a random node), for the window's detail: a
	// leader lookup that fails, e.g. on credentials the nodes refuse,
	// shows there instead of quietly making every fault random.
	detail string
}

func (m *Nemesis) between(a, b time.Duration) time.Duration {
	if b <= a {
		return a
	}
	return a + time.Duration(m.Rand.Int64N(int64(b-a)))
}

// target picks the leader half the time (when known and the budget
// allows it), else a random node the budget allows.
func (m *Nemesis) target(ctx context.Context) int {
	cands := m.budget.candidates(len(m.C.Nodes))
	if m.Rand.IntN(2) == 0 {
		if l := m.C.Leader(ctx, m.Self); l > 0 && m.budget.allows(nodeName(m.C, l)) {
			m.detail = "target: the leader"
			return l
		} else if l > 0 {
			m.detail = "target: a random node (the leader is outside the overlap budget)"
		} else {
			m.detail = "target: a random node (leader unknown)"
		}
	} else {
		m.detail = "target: a random node"
	}
	if len(cands) == 0 { // overlapBudget never lets this happen
		return 1 + m.Rand.IntN(len(m.C.Nodes))
	}
	id := cands[m.Rand.IntN(len(cands))]
	for _, x := range m.C.Nodes {
		if x.ID == id {
			return x.I
		}
	}
	return 1
}

func (m *Nemesis) injector() Injector {
	if m.Inject != nil {
		return m.Inject
	}
	return clusterInjector{m}
}

// clusterInjector is the real injector: namespaces, iptables, signals.
type clusterInjector struct{ m *Nemesis }

func (ci clusterInjector) Apply(ctx context.Context, name string, b Budget) (Window, healFunc, error) {
	ci.m.budget = b
	nodes, heal, detail, err := ci.m.apply(ctx, name)
	w := Window{Detail: detail}
	for _, n := range nodes {
		w.Nodes = append(w.Nodes, ci.m.C.Nodes[n-1].ID)
	}
	return w, heal, err
}

func (ci clusterInjector) HealAll(ctx context.Context) { ci.m.HealAll(ctx) }

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// plain adapts a heal without an outcome.
func plain(f func(context.Context) error) healFunc {
	return func(ctx context.Context) (string, error) { return "", f(ctx) }
}

func (m *Nemesis) apply(ctx context.Context, name string) ([]int, healFunc, string, error) {
	switch name {
	case FaultCorrupt:
		return m.corrupt(ctx)
	case FaultMembership:
		return m.membership(ctx)
	case FaultRollingRestart:
		return m.rollingRestart(ctx)
	case FaultUpgrade:
		return m.rollingUpgrade(ctx)
	}
	m.detail = ""
	nodes, heal, err := m.applyOther(ctx, name)
	return nodes, heal, m.detail, err
}

func (m *Nemesis) applyOther(ctx context.Context, name string) ([]int, healFunc, error) {
	c, n := m.C, len(m.C.Nodes)
	perm := m.Rand.Perm(n)
	for i := range perm {
		perm[i]++
	}
	// Each fault heals only the rules it added: another fault's may hold.
	rules := c.Net.Rules()
	netHeal := plain(rules.Heal)
	cut := func(a, b []int) error {
		for _, i := range a {
			for _, j := range b {
				if err := rules.Cut(ctx, i, j); err != nil {
					return err
				}
			}
		}
		return nil
	}
	switch name {
	case FaultHalves:
		// The cut-off side takes in the nodes held faults already impair
		// (Budget.Must), so that the union stays a minority.
		var must, rest []int
		for _, i := range perm {
			if slices.Contains(m.budget.Must, nodeName(c, i)) {
				must = append(must, i)
			} else {
				rest = append(rest, i)
			}
		}
		perm = append(must, rest...)
		minority := perm[:n/2]
		return minority, netHeal, cut(minority, perm[n/2:])
	case FaultLeader:
		l := m.target(ctx)
		if ll := c.Leader(ctx, m.Self); ll > 0 && m.budget.allows(nodeName(c, ll)) {
			l = ll
			m.detail = "target: the leader"
		} else if ll > 0 {
			m.detail = "target: a random node (the leader is outside the overlap budget)"
		} else {
			m.detail = "target: a random node (leader unknown)"
		}
		var rest []int
		for i := 1; i <= n; i++ {
			if i != l {
				rest = append(rest, i)
			}
		}
		return []int{l}, netHeal, cut([]int{l}, rest)
	case FaultBridge:
		if n >= 5 { // ring: each node reaches only its two neighbours
			for a := 0; a < n; a++ {
				for b := a + 2; b < n; b++ {
					if a == 0 && b == n-1 {
						continue
					}
					if err := rules.Cut(ctx, perm[a], perm[b]); err != nil {
						return nil, netHeal, err
					}
				}
			}
			return perm, netHeal, nil
		}
		// bridge: perm[0] reaches both sides, which cannot reach each other
		half := 1 + (n-1)/2
		return perm[:1], netHeal, cut(perm[1:half], perm[half:])
	case FaultOneWay:
		x := m.target(ctx)
		for j := 1; j <= n; j++ {
			if j != x {
				if err := rules.Drop(ctx, x, j); err != nil {
					return nil, netHeal, err
				}
			}
		}
		return []int{x}, netHeal, nil
	case FaultLoss:
		for i := 1; i <= n; i++ {
			if err := rules.Loss(ctx, i, 0.2); err != nil {
				return nil, netHeal, err
			}
		}
		return perm, netHeal, nil
	case FaultKill:
		x := c.Nodes[m.target(ctx)-1]
		if err := c.Kill(x); err != nil {
			return nil, nil, err
		}
		return []int{x.I}, plain(func(context.Context) error { return c.Start(x) }), nil
	case FaultPause:
		x := c.Nodes[m.target(ctx)-1]
		if err := x.signal(syscall.SIGSTOP); err != nil {
			return nil, nil, err
		}
		return []int{x.I}, plain(func(context.Context) error { return x.signal(syscall.SIGCONT) }), nil
	case FaultClock:
		x := c.Nodes[m.target(ctx)-1]
		off := time.Duration(1+m.Rand.IntN(int(MaxClockOffset/time.Second))) * time.Second
		if m.Rand.IntN(2) == 0 {
			off = -off
		}
		heal := plain(func(context.Context) error { return c.restartWithOffset(x, 0) })
		if err := c.restartWithOffset(x, off); err != nil {
			return nil, heal, err
		}
		// Half the time, make the skewed node lead: its clock then stamps
		// the log, and the reaper scans by it.
		if m.Rand.IntN(2) == 0 {
			sleepCtx(ctx, 3*time.Second)
			l := c.MoveLeader(ctx, m.Self, x)
			m.log.Info("moved leadership to the skewed node", "node", x.ID, "offset", off, "leader", l)
			m.detail = fmt.Sprintf("%s; offset %s; leadership moved to it: leader after is %s", m.detail, off, nodeName(c, l))
		} else {
			m.detail = fmt.Sprintf("%s; offset %s", m.detail, off)
		}
		return []int{x.I}, heal, nil
	case FaultLostData:
		x := c.Nodes[m.target(ctx)-1]
		return []int{x.I}, plain(func(ctx context.Context) error { return c.Start(x) }), c.LoseUnsynced(ctx, x)
	}
	return nil, nil, fmt.Errorf("unknown fault %q", name)
}

func (c *Cluster) restartWithOffset(x *Node, off time.Duration) error {
	if x.Running() {
		if err := c.Kill(x); err != nil {
			return err
		}
	}
	x.mu.Lock()
	x.offset = off
	x.mu.Unlock()
	return c.Start(x)
}

// HealAll undoes every fault: flushes filters, resumes paused nodes,
// clears clock offsets and starts every node that is down.
func (m *Nemesis) HealAll(ctx context.Context) {
	if err := m.C.Net.Heal(ctx); err != nil {
		m.log.Warn("heal network", "err", err)
	}
	for _, x := range m.C.Nodes {
		_ = x.signal(syscall.SIGCONT)
		x.mu.Lock()
		off := x.offset
		x.mu.Unlock()
		var err error
		if off != 0 {
			err = m.C.restartWithOffset(x, 0)
		} else if !x.Running() {
			err = m.C.Start(x)
		}
		if err != nil {
			m.log.Warn("heal node", "node", x.ID, "err", err)
		}
	}
}

// LoseUnsynced kills node x and replaces its data directory's loop-mounted
// ext4 image with a copy taken at the moment of the kill: whatever the
// kernel had not yet written through to the image (the node's unfsynced
// writes) is lost, as after a power cut of that node alone.
func (c *Cluster) LoseUnsynced(ctx context.Context, x *Node) error {
	if !c.Loop {
		return fmt.Errorf("lost-unfsynced-writes needs loop-mounted data dirs (--loop)")
	}
	img := x.DataDir + ".img"
	if err := c.Kill(x); err != nil {
		return err
	}
	// Copy the backing file while the filesystem is still mounted: the copy
	// holds only what reached the loop device.
	if _, err := run(ctx, "cp", "--sparse=always", img, img+".crash"); err != nil {
		return err
	}
	if _, err := run(ctx, "umount", "-l", x.DataDir); err != nil {
		return err
	}
	if _, err := run(ctx, "mv", img+".crash", img); err != nil {
		return err
	}
	if out, err := run(ctx, "fsck.ext4", "-p", img); err != nil && !strings.Contains(err.Error(), "exit status 1") {
		c.log.Warn("fsck after crash copy", "node", x.ID, "out", out, "err", err)
	}
	_, err := run(ctx, "mount", "-o", "loop,data=writeback", img, x.DataDir)
	return err
}

// loopImageSize is each node's loop image. 512 MiB holds a BoltDB log
// between snapshots, but raft-wal writes every segment out in full
// (64 MiB), starts a new one at each tail truncation ("clearing log
// suffix": a node that rejoins with uncommitted entries, as a leader cut
// off does), and frees segments only when a snapshot compacts the log: a
// wal node cut off as leader five times between two snapshots filled its
// 512 MiB (RESULTS.md, the wal run of 2026-11-26). The image is sparse:
// only what is written costs disk.
func (c *Cluster) loopImageSize() string {
	if c.DiskSize != "" {
		return c.DiskSize
	}
	if c.LogStore != "bolt" { // the agent's default is wal
		return "2G"
	}
	return "512M"
}

// setupLoop formats a loop-mounted ext4 image per node data directory,
// mounted data=writeback so that an fsync of the Raft log does not also
// push out the unsynced Pebble writes (data=ordered would, at each journal
// commit, and little would be lost).
func (c *Cluster) setupLoop(ctx context.Context) error {
	for _, x := range c.Nodes {
		img := x.DataDir + ".img"
		steps := [][]string{{"truncate", "-s", c.loopImageSize(), img}, {"mkfs.ext4", "-q", "-F", img}, {"mount", "-o", "loop,data=writeback", img, x.DataDir}}
		for _, s := range steps {
			if _, err := run(ctx, s[0], s[1:]...); err != nil {
				return fmt.Errorf("loop data dir: %w", err)
			}
		}
	}
	return nil
}

// teardownLoop unmounts the images (lazily: a killed agent may hold them).
func (c *Cluster) teardownLoop() {
	for _, x := range c.Nodes {
		_ = exec.Command("umount", "-l", x.DataDir).Run()
	}
}

// nodeName is node i's id, or "unknown" for 0.
func nodeName(c *Cluster, i int) string {
	if i < 1 || i > len(c.Nodes) {
		return "unknown"
	}
	return c.Nodes[i-1].ID
}
