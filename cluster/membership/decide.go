package membership

import (
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/gossip"
)

// Rules are the knobs of Decide (cluster.Config documents each).
type Rules struct {
	DeadServerTimeout time.Duration
	Stabilization     time.Duration
	MinQuorum         int
	// RemovedHold is how long a server an operator removed is not added
	// back while gossip still shows it alive as it was before the remove.
	RemovedHold time.Duration
}

// Input is everything Decide looks at: the leader's view at
// one instant.
type Input struct {
	Self    string
	Servers []raft.Server // the latest configuration
	// Members holds every gossip member and, for each server of the
	// configuration that gossip does not know, a failed entry since the
	// leader first missed it.
	Members map[string]gossip.Member
	// HealthySince holds, per server, since when it has been healthy
	// without a break: alive, same term, within MaxTrailingLogs.
	HealthySince map[string]time.Time
	Now          time.Time
	Rules        Rules
	// Removed holds, per server an operator removed (RemoveServer) on this
	// leader, when.
	Removed map[string]time.Time
	// Enabled is the feature level the cluster latched: a member whose
	// build is below it would stop at its first newer entry, so it is not
	// added.
	Enabled uint32
}

// ActionKind names a change to the configuration.
type ActionKind int

// The changes Decide makes.
const (
	AddNonvoter ActionKind = iota + 1
	Promote
	Remove
)

func (k ActionKind) String() string {
	return map[ActionKind]string{AddNonvoter: "add-nonvoter", Promote: "promote", Remove: "remove"}[k]
}

// Action is one change to the configuration.
type Action struct {
	Kind   ActionKind
	ID     string
	Addr   string // Raft address, for adds
	Reason string
}

// Decide is the reconcile rule book (DESIGN.md, "Reconcile"), a pure
// function of the leader's view. In order:
//
//  1. every alive member outside the configuration is added as a
//     non-voter, unless a server of the configuration holds its Raft
//     address (a wiped server back under a new id), which is removed
//     first, or its build is below the latched feature level (it would
//     stop at its first newer entry);
//  2. servers that announced a leave are removed;
//  3. servers failed (or absent from gossip) for DeadServerTimeout are
//     removed, oldest failure first, only while the voters left stay at
//     MinQuorum or more;
//  4. voter removals of one round stop at (voters-1)/2, so one round can
//     never take away a quorum's worth of votes;
//  5. with no voter removed this round, non-voters healthy for the
//     stabilization time are promoted (never promote and demote in one
//     round: each change's effect on quorum is seen alone).
//
// The leader never removes itself; it leaves by transferring leadership
// first (cluster.Node.Leave).
func Decide(in Input) []Action {
	var acts []Action
	inCfg := map[string]raft.Server{}
	byAddr := map[string]string{}
	voters := 0
	for _, s := range in.Servers {
		inCfg[string(s.ID)] = s
		byAddr[string(s.Address)] = string(s.ID)
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	ids := make([]string, 0, len(in.Members))
	for id := range in.Members {
		ids = append(ids, id)
	}
	sort.Strings(ids)

	type candidate struct {
		id, reason string
		since      time.Time
	}
	var replaced, left, failed []candidate
	for _, id := range ids {
		m := in.Members[id]
		if _, ok := inCfg[id]; ok || id == in.Self || m.Status != gossip.StatusAlive || m.RaftAddr == "" || m.Features < in.Enabled {
			continue
		}
		// `docket cluster remove` of a server just stopped: gossip may
		// still show it alive for a few seconds. Adding it back would undo
		// the remove; a restart after the remove (alive since then) is a
		// new start, and is added.
		if at, ok := in.Removed[id]; ok && in.Now.Sub(at) < in.Rules.RemovedHold && !m.Since.After(at) {
			continue
		}
		if old, taken := byAddr[m.RaftAddr]; taken && old != in.Self {
			replaced = append(replaced, candidate{id: old, reason: "its address now belongs to " + id})
			continue
		}
		acts = append(acts, Action{Kind: AddNonvoter, ID: id, Addr: m.RaftAddr, Reason: "alive member outside the configuration"})
	}
	for _, s := range in.Servers {
		id := string(s.ID)
		m, ok := in.Members[id]
		if id == in.Self || !ok {
			continue
		}
		switch {
		case m.Status == gossip.StatusLeft:
			left = append(left, candidate{id: id, reason: "announced a leave"})
		case m.Status == gossip.StatusFailed && in.Now.Sub(m.Since) >= in.Rules.DeadServerTimeout:
			failed = append(failed, candidate{id: id, reason: fmt.Sprintf("failed for %v", in.Now.Sub(m.Since).Round(time.Second)), since: m.Since})
		}
	}
	sort.SliceStable(failed, func(i, j int) bool { return failed[i].since.Before(failed[j].since) })

	maxVoterRemovals := (voters - 1) / 2
	removedVoters := 0
	removed := map[string]bool{}
	remove := func(c candidate, boundByQuorum bool) {
		if removed[c.id] {
			return
		}
		if inCfg[c.id].Suffrage == raft.Voter {
			if removedVoters >= maxVoterRemovals {
				return
			}
			if boundByQuorum && voters-removedVoters-1 < in.Rules.MinQuorum {
				return
			}
			removedVoters++
		}
		removed[c.id] = true
		acts = append(acts, Action{Kind: Remove, ID: c.id, Reason: c.reason})
	}
	for _, c := range replaced {
		remove(c, true)
	}
	for _, c := range left {
		remove(c, false)
	}
	for _, c := range failed {
		remove(c, true)
	}
	if removedVoters > 0 {
		return acts
	}
	for _, s := range in.Servers {
		id := string(s.ID)
		if s.Suffrage != raft.Nonvoter || removed[id] {
			continue
		}
		m, ok := in.Members[id]
		since, healthy := in.HealthySince[id]
		if ok && m.Status == gossip.StatusAlive && healthy && in.Now.Sub(since) >= in.Rules.Stabilization {
			acts = append(acts, Action{Kind: Promote, ID: id, Addr: string(s.Address), Reason: "caught up and stable"})
		}
	}
	return acts
}
