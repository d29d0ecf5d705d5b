package jepsen

import (
	"fmt"
	"slices"
	"sort"
)

// faultClass is what a fault does to the cluster, for deciding which
// faults may hold at the same time.
type faultClass int

const (
	// classAlone faults never overlap another: the ring or bridge
	// partition leaves no slack, a corrupted node's settle may wipe it, and
	// membership and the rolling procedures change who is in the cluster.
	classAlone faultClass = iota
	// classProc faults stop, pause or restart one node's process.
	classProc
	// classNetOne faults cut one node off with filter rules.
	classNetOne
	// classHalves cuts a minority off from the rest.
	classHalves
	// classDegrade touches every node without cutting any off (packet loss).
	classDegrade
)

func classOf(name string) faultClass {
	switch name {
	case FaultKill, FaultPause, FaultClock, FaultLostData:
		return classProc
	case FaultLeader, FaultOneWay:
		return classNetOne
	case FaultHalves:
		return classHalves
	case FaultLoss:
		return classDegrade
	}
	return classAlone
}

// procedureFault: the fault does its whole work while being applied (the
// rolling procedures), so its window ends as soon as it returns.
func procedureFault(name string) bool {
	return name == FaultRollingRestart || name == FaultUpgrade
}

// Budget limits the nodes a fault applied beside others may impair, so
// that a majority stays up and connected.
type Budget struct {
	// Within: the fault's node must be one of these; nil means any node.
	Within []string
	// Avoid: nodes whose process another fault holds (two process faults
	// on one node would undo each other's heal).
	Avoid []string
	// Must: a partition's cut-off side must include these nodes.
	Must []string
}

// heldFault is a fault window that is open: what the scheduler knows of it.
type heldFault struct {
	Name  string
	Nodes []string // the nodes it hit
}

// impaired are the nodes a held fault takes down or cuts off; packet loss
// slows every node but cuts none off.
func (h heldFault) impaired() []string {
	if classOf(h.Name) == classDegrade {
		return nil
	}
	return h.Nodes
}

// overlapBudget decides whether fault name may start while active hold on
// an n-node cluster, and within which budget. The rule: the nodes that all
// held faults take down or cut off stay a minority ((n-1)/2), no fault
// overlaps itself or a classAlone fault, and no two process faults share a
// node. With nothing held, any fault may start, on any node.
func overlapBudget(name string, active []heldFault, n int) (Budget, bool) {
	if len(active) == 0 {
		return Budget{}, true
	}
	cls := classOf(name)
	if cls == classAlone {
		return Budget{}, false
	}
	imp, proc := map[string]bool{}, map[string]bool{}
	for _, a := range active {
		if a.Name == name || classOf(a.Name) == classAlone {
			return Budget{}, false
		}
		for _, id := range a.impaired() {
			imp[id] = true
		}
		if classOf(a.Name) == classProc {
			for _, id := range a.Nodes {
				proc[id] = true
			}
		}
	}
	minority := (n - 1) / 2
	switch cls {
	case classDegrade:
		return Budget{}, true
	case classHalves:
		// The cut-off side has n/2 nodes: it must take in every node
		// already impaired, or the union grows past a minority.
		if len(imp) > n/2 {
			return Budget{}, false
		}
		return Budget{Must: keys(imp)}, true
	}
	var b Budget
	if len(imp) >= minority {
		b.Within = keys(imp)
	}
	if cls == classProc {
		b.Avoid = keys(proc)
	}
	if len(b.candidates(n)) == 0 {
		return Budget{}, false
	}
	return b, true
}

// candidates are the node ids (n1..nN) the budget lets a one-node fault hit.
func (b Budget) candidates(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		if (b.Within == nil || slices.Contains(b.Within, id)) && !slices.Contains(b.Avoid, id) {
			out = append(out, id)
		}
	}
	return out
}

// allows reports whether node id may be hit under b.
func (b Budget) allows(id string) bool {
	return (b.Within == nil || slices.Contains(b.Within, id)) && !slices.Contains(b.Avoid, id)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
