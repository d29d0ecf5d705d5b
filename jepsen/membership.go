package jepsen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Deadlines of the membership and rolling faults. A node that leaves and
// rejoins empty is added as a non-voter and promoted after the agent's
// server stabilization time (10 s by default) once caught up; two minutes
// leave room for a snapshot install under load on a 2-core machine.
const (
	rejoinDeadline  = 2 * time.Minute
	restartDeadline = time.Minute
	latchDeadline   = time.Minute
	stopGrace       = 30 * time.Second
)

// membership makes one node (the leader or a random node, by the seed)
// leave gracefully with the Leave RPC (docket cluster leave), waits for
// its agent to stop, and wipes its data directory. The heal starts it
// empty: it rejoins by gossip as a fresh member, the leader adds it as a
// non-voter and promotes it. The heal is complete only when every node is
// a voter again; a cluster that does not get there within rejoinDeadline
// is a finding. So is a Leave that does not complete (the long run of
// 2026-11-23 found one: the leaving node never learnt of its removal):
// the node is then stopped with SIGTERM and the fault goes on, so that
// one finding does not end the nemesis.
func (m *Nemesis) membership(ctx context.Context) ([]int, healFunc, string, error) {
	c := m.C
	m.detail = ""
	x := c.Nodes[m.target(ctx)-1]
	detail := m.detail
	leaveErr := c.Leave(ctx, m.Self, x)
	switch {
	case leaveErr != nil:
		detail += "; the leave did not complete (stopped with SIGTERM): " + leaveErr.Error()
		c.Stop(x, 5*time.Second)
	case x.waitExit(stopGrace) != nil:
		detail += "; the agent did not stop after its leave (stopped with SIGTERM)"
		c.Stop(x, 5*time.Second)
	}
	after := "unknown"
	if v, err := c.View(ctx, m.Self, false); err == nil {
		after = v.String()
		if v.Has(x.ID) {
			detail += "; still in the configuration after its leave"
		}
	}
	detail = fmt.Sprintf("%s; %s left: %s", detail, x.ID, after)
	if err := wipeDir(x); err != nil {
		return []int{x.I}, plain(func(context.Context) error { return c.Start(x) }), detail, err
	}
	heal := func(ctx context.Context) (string, error) {
		if err := c.Start(x); err != nil {
			return "", err
		}
		t0 := time.Now()
		v, ok := c.waitFull(ctx, m.Self, rejoinDeadline, nil)
		if !ok {
			return "", fmt.Errorf("%w: %s not back to %d voters within %s after rejoining empty: %s", ErrFinding,
				x.ID, len(c.Nodes), rejoinDeadline, v)
		}
		out := fmt.Sprintf("rejoined empty; a voter again after %s (%s)", time.Since(t0).Round(100*time.Millisecond), v)
		if leaveErr != nil {
			return out, fmt.Errorf("%w: the leave of %s did not complete: %v", ErrFinding, x.ID, leaveErr)
		}
		return out, nil
	}
	return []int{x.I}, heal, detail, nil
}

// wipeDir empties node x's data directory (x is stopped).
func wipeDir(x *Node) error {
	ents, err := os.ReadDir(x.DataDir)
	if err != nil {
		return fmt.Errorf("wipe %s: %w", x.ID, err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(x.DataDir, e.Name())); err != nil {
			return fmt.Errorf("wipe %s: %w", x.ID, err)
		}
	}
	if lf, err := os.OpenFile(x.LogPath, os.O_APPEND|os.O_WRONLY, 0); err == nil {
		fmt.Fprintf(lf, "=== harness: wiped %s's data dir at %s\n", x.ID, time.Now().UTC().Format(time.RFC3339Nano))
		lf.Close()
	}
	return nil
}

// waitFull polls until every node is a voter, a leader is known and, if
// node is given, it serves; it returns the last view and whether it got
// there within d.
func (c *Cluster) waitFull(ctx context.Context, self string, d time.Duration, node *Node) (View, bool) {
	end := time.Now().Add(d)
	var last View
	for time.Now().Before(end) && ctx.Err() == nil {
		v, err := c.View(ctx, self, false)
		if err == nil {
			last = v
			if len(v.Voters) == len(c.Nodes) && len(v.NonVoters) == 0 && (node == nil || c.Health(ctx, self, node) == "SERVING") {
				return v, true
			}
		}
		sleepCtx(ctx, time.Second)
	}
	return last, false
}

// voterWatch polls the configuration while a rolling procedure runs and
// keeps the fewest voters it saw: a plain restart must never shrink it.
type voterWatch struct {
	mu     sync.Mutex
	min    int
	seen   int
	at     string
	cancel context.CancelFunc
	done   chan struct{}
}

func (c *Cluster) watchVoters(ctx context.Context, self string) *voterWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &voterWatch{min: len(c.Nodes), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; i < 100_000 && ctx.Err() == nil; i++ {
			if v, err := c.View(ctx, self, false); err == nil {
				w.mu.Lock()
				w.seen++
				if len(v.Voters) < w.min {
					w.min, w.at = len(v.Voters), v.String()
				}
				w.mu.Unlock()
			}
			sleepCtx(ctx, time.Second)
		}
	}()
	return w
}

// stop ends the watch and returns the fewest voters seen, the view that
// showed it, and how many views it read.
func (w *voterWatch) stop() (int, string, int) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.min, w.at, w.seen
}

// rollingRestart restarts every node in turn: SIGTERM (the agent hands
// leadership over and stops, without leaving), start, and wait until the
// node serves and the configuration has every node as a voter before the
// next. The whole procedure is the fault, so its window ends when it
// does. A node that is not back within restartDeadline, or a voter count
// that ever drops, is a finding.
func (m *Nemesis) rollingRestart(ctx context.Context) ([]int, healFunc, string, error) {
	return m.rolling(ctx, "")
}

// rollingUpgrade replaces each node's binary with the current one, one
// node at a time, as rollingRestart restarts them. While any node still
// runs the older binary the latched feature level must stay where it was
// and the gate probe (ClusterView) must be answered as the older level
// answers it (ProbeBefore: refused below ProbeLevel); after the last one
// the leader must latch the level of the new binary within latchDeadline,
// and the probe must then be accepted. Anything else is a finding.
func (m *Nemesis) rollingUpgrade(ctx context.Context) ([]int, healFunc, string, error) {
	if m.C.NewBin == "" {
		return nil, nil, "", fmt.Errorf("rolling-upgrade needs a cluster started on an older binary (--upgrade-from)")
	}
	return m.rolling(ctx, m.C.NewBin)
}

func (m *Nemesis) rolling(ctx context.Context, newBin string) ([]int, healFunc, string, error) {
	c := m.C
	var notes, findings []string
	var before View
	if newBin != "" {
		v, err := c.View(ctx, m.Self, true)
		if err != nil {
			return nil, nil, "", fmt.Errorf("rolling-upgrade: %w", err)
		}
		before = v
		notes = append(notes, fmt.Sprintf("before: level %d, probe %s", v.Enabled, v.Probe))
		if want := ProbeBefore(v.Enabled); v.Probe != want {
			findings = append(findings, fmt.Sprintf("before the upgrade, at level %d, the gate probe was not %s: %s", v.Enabled, want, v.Probe))
		}
	}
	watch := c.watchVoters(ctx, m.Self)
	order := m.Rand.Perm(len(c.Nodes))
	var hit []int
	for k, i := range order {
		x := c.Nodes[i]
		hit = append(hit, x.I)
		t0 := time.Now()
		c.Stop(x, stopGrace)
		if newBin != "" {
			x.mu.Lock()
			x.bin = newBin
			x.mu.Unlock()
		}
		if err := c.Start(x); err != nil {
			watch.stop()
			return hit, plain(func(context.Context) error { return nil }), strings.Join(notes, "; "), err
		}
		v, ok := c.waitFull(ctx, m.Self, restartDeadline, x)
		if !ok {
			findings = append(findings, fmt.Sprintf("%s not back (serving, %d voters) within %s: %s", x.ID, len(c.Nodes), restartDeadline, v))
			continue
		}
		notes = append(notes, fmt.Sprintf("%s back in %s", x.ID, time.Since(t0).Round(100*time.Millisecond)))
		if newBin != "" && k < len(order)-1 {
			// One old server holds the level back, even while it restarts.
			v, err := c.View(ctx, m.Self, true)
			if err == nil && (v.Enabled != before.Enabled || v.Probe != ProbeBefore(before.Enabled)) {
				findings = append(findings, fmt.Sprintf("with %d of %d upgraded: level %d (was %d), probe %s", k+1, len(order), v.Enabled, before.Enabled, v.Probe))
			}
		}
	}
	low, at, seen := watch.stop()
	notes = append(notes, fmt.Sprintf("fewest voters seen %d in %d views", low, seen))
	if low < len(c.Nodes) {
		findings = append(findings, fmt.Sprintf("the configuration shrank to %d voters: %s", low, at))
	}
	if newBin != "" {
		notes, findings = m.awaitLatch(ctx, before, notes, findings)
	}
	detail := strings.Join(notes, "; ")
	heal := func(context.Context) (string, error) {
		if len(findings) > 0 {
			return detail, fmt.Errorf("%w: %s", ErrFinding, strings.Join(findings, "; "))
		}
		return detail, nil
	}
	return hit, heal, detail, nil
}

// awaitLatch waits for the leader to latch the level every upgraded
// server announces, then checks that the gate probe is now accepted.
func (m *Nemesis) awaitLatch(ctx context.Context, before View, notes, findings []string) ([]string, []string) {
	end := time.Now().Add(latchDeadline)
	var v View
	for time.Now().Before(end) && ctx.Err() == nil {
		var err error
		if v, err = m.C.View(ctx, m.Self, false); err == nil {
			want := uint32(0)
			for _, l := range v.Levels {
				want = max(want, l)
			}
			if want > before.Enabled && v.Enabled == want {
				break
			}
		}
		sleepCtx(ctx, time.Second)
	}
	low := ^uint32(0)
	for _, l := range v.Levels {
		low = min(low, l)
	}
	if v.Enabled <= before.Enabled || v.Enabled != low {
		return notes, append(findings, fmt.Sprintf("level not latched within %s: enabled %d, servers announce %v", latchDeadline, v.Enabled, v.Levels))
	}
	p, err := m.C.View(ctx, m.Self, true)
	if err != nil || p.Probe != ProbeAccepted {
		findings = append(findings, fmt.Sprintf("after the latch the gate probe was not accepted: %s %v", p.Probe, err))
	}
	return append(notes, fmt.Sprintf("latched level %d -> %d; probe %s", before.Enabled, v.Enabled, p.Probe)), findings
}
