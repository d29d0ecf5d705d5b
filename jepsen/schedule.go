package jepsen

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrFinding marks a heal that did its work but found the cluster short of
// what it promises (a node not back as a voter within the deadline, the
// voter count dropping in a plain restart, a feature level not latched).
// The window's stop event carries it and the findings checker fails the
// run; nothing else is healed because of it.
var ErrFinding = errors.New("finding")

// farFuture stands for "after the next heal" in the scheduler.
var farFuture = time.Now().Add(100 * 365 * 24 * time.Hour)

// held is an open fault window.
type held struct {
	win   int64
	name  string
	nodes []string
	heal  healFunc
	until time.Time
}

// Run injects faults until ctx ends or until, which it does not overrun
// by more than a heal. Faults come in shuffled rounds of m.Faults, after
// m.First once. While one fault holds, a second one (up to m.Overlap) may
// start partway through it, half the time, if overlapBudget allows the
// next fault of the round beside it; if not, the round waits for the
// held fault to heal, so no fault is skipped. A fault that fails to apply
// ends it: the failure is recorded (a nemesis fail event with the command
// and its error), which fails the run, and everything is healed. It
// returns that failure.
func (m *Nemesis) Run(ctx context.Context, until time.Time) error {
	inj := m.injector()
	overlap := max(1, m.Overlap)
	first := append([]string(nil), m.First...)
	var active []*held
	var winID int64
	round, shuffled := 0, -1
	next := time.Now().Add(m.between(m.Quiet/2, m.Quiet))
	for step := 0; step < 1_000_000 && ctx.Err() == nil; step++ {
		now := time.Now()
		healed := false
		for k := 0; k < len(active); {
			a := active[k]
			if a.until.After(now) {
				k++
				continue
			}
			active = append(active[:k], active[k+1:]...)
			healed = true
			if !m.stop(inj, a) {
				m.abandon(active, a.name)
				active = nil
			}
		}
		if healed {
			now = time.Now() // a heal may take long (a rejoin): rest after it
			if len(active) == 0 {
				next = now.Add(m.between(m.Quiet/2, m.Quiet))
			} else {
				next = now.Add(m.Quiet / 2)
			}
		}
		open := now.Add(m.HoldMin).Before(until)
		if !open && len(active) == 0 {
			return nil
		}
		var name string
		switch {
		case len(first) > 0:
			name = first[0]
		case len(m.Faults) > 0:
			if round%len(m.Faults) == 0 && shuffled != round {
				// Shuffled rounds, not independent draws: every fault of
				// the scenario comes up once per round, even in a 90 s smoke.
				m.Rand.Shuffle(len(m.Faults), func(a, b int) { m.Faults[a], m.Faults[b] = m.Faults[b], m.Faults[a] })
				shuffled = round
			}
			name = m.Faults[round%len(m.Faults)]
		}
		if open && name != "" && !now.Before(next) && len(active) < overlap {
			var hs []heldFault
			for _, a := range active {
				hs = append(hs, heldFault{Name: a.name, Nodes: a.nodes})
			}
			b, ok := overlapBudget(name, hs, m.size())
			if len(first) > 0 && len(active) > 0 {
				ok = false
			}
			if !ok {
				next = farFuture // after a heal
			} else {
				winID++
				a, err := m.start(ctx, inj, winID, name, b, until)
				if err != nil {
					m.abandon(active, name)
					return err
				}
				active = append(active, a)
				if len(first) > 0 {
					first = first[1:]
				} else {
					round++
				}
				next = farFuture
				if len(active) < overlap && m.Rand.IntN(2) == 0 && !procedureFault(name) {
					next = time.Now().Add(m.between(m.HoldMin/4, m.HoldMin))
				}
			}
			continue
		}
		wake := next
		if !open {
			wake = farFuture
		}
		for _, a := range active {
			if a.until.Before(wake) {
				wake = a.until
			}
		}
		if !open && len(active) == 0 {
			return nil
		}
		if d := time.Until(wake); d > 0 {
			sleepCtx(ctx, min(d, time.Second))
		}
	}
	if len(active) > 0 {
		m.abandon(active, "")
		inj.HealAll(context.Background())
	}
	return nil
}

// start applies one fault and records its window.
func (m *Nemesis) start(ctx context.Context, inj Injector, id int64, name string, b Budget, until time.Time) (*held, error) {
	hold := min(m.between(m.HoldMin, m.HoldMax), time.Until(until))
	if procedureFault(name) {
		hold = 0 // the procedure is the fault
	}
	t0 := Now() // the window starts when the fault starts to be applied
	win, heal, err := inj.Apply(ctx, name, b)
	if err != nil {
		m.Rec.Record(Event{Proc: "nemesis", Type: Fail, F: FNemesis, Fault: name, Win: id, Err: err.Error()})
		m.log.Error("fault not applied: the run fails", "fault", name, "err", err)
		inj.HealAll(context.Background())
		return nil, fmt.Errorf("fault %s not applied: %w", name, err)
	}
	ns := make([]NodeState, 0, len(win.Nodes))
	for _, id := range win.Nodes {
		ns = append(ns, NodeState{ID: id})
	}
	m.Rec.Record(Event{T: t0, Proc: "nemesis", Type: Start, F: FNemesis, Fault: name, Win: id, Nodes: ns, Detail: win.Detail})
	m.log.Info("fault", "name", name, "win", id, "nodes", win.Nodes, "hold", hold.Round(time.Millisecond), "detail", win.Detail,
		"budget", fmt.Sprintf("%+v", b))
	return &held{win: id, name: name, nodes: win.Nodes, heal: heal, until: time.Now().Add(hold)}, nil
}

// stop heals one window and records its end. A heal that fails is
// followed by HealAll, and stop returns false: the other open windows
// were healed with it. A finding (ErrFinding) is recorded, not healed.
func (m *Nemesis) stop(inj Injector, a *held) bool {
	outcome, err := a.heal(context.Background())
	ev := Event{Proc: "nemesis", Type: Stop, F: FNemesis, Fault: a.name, Win: a.win}
	ok := true
	switch {
	case errors.Is(err, ErrFinding):
		ev.Err = err.Error()
		m.log.Error("finding at heal", "fault", a.name, "win", a.win, "err", err)
	case err != nil:
		m.log.Warn("heal failed; healing all", "fault", a.name, "err", err)
		outcome = strings.TrimSpace(outcome + " heal failed: " + err.Error())
		inj.HealAll(context.Background())
		ok = false
	}
	ev.Detail = outcome
	m.Rec.Record(ev)
	m.log.Info("healed", "name", a.name, "win", a.win, "outcome", outcome)
	return ok
}

// abandon closes the windows of faults that a HealAll already undid.
func (m *Nemesis) abandon(active []*held, cause string) {
	for _, a := range active {
		m.Rec.Record(Event{Proc: "nemesis", Type: Stop, F: FNemesis, Fault: a.name, Win: a.win,
			Detail: "healed by heal-all after " + cause + " failed"})
	}
}

// size is the number of nodes.
func (m *Nemesis) size() int {
	if m.C != nil {
		return len(m.C.Nodes)
	}
	return m.N
}
