package cluster

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/gossip"
)

// world builds a reconcile input: size voters n1..n<size> with n1 the
// leader, all alive unless edited.
type world struct{ in reconcileInput }

var t0 = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)

func newWorld(voters, nonvoters int) *world {
	w := &world{in: reconcileInput{Self: "n1", Members: map[string]gossip.Member{}, HealthySince: map[string]time.Time{},
		Now:   t0.Add(time.Hour),
		Rules: reconcileRules{DeadServerTimeout: time.Minute, Stabilization: 10 * time.Second, MinQuorum: 3, RemovedHold: time.Minute}}}
	for i := 1; i <= voters+nonvoters; i++ {
		id := fmt.Sprintf("n%d", i)
		suf := raft.Voter
		if i > voters {
			suf = raft.Nonvoter
		}
		w.in.Servers = append(w.in.Servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr(i)), Suffrage: suf})
		w.member(id, addr(i), gossip.StatusAlive, t0)
	}
	return w
}

func addr(i int) string { return fmt.Sprintf("10.0.0.%d:7501", i) }

func (w *world) member(id, raftAddr string, st gossip.Status, since time.Time) *world {
	w.in.Members[id] = gossip.Member{Meta: gossip.Meta{ID: id, RaftAddr: raftAddr}, Status: st, Since: since}
	return w
}

// failed marks ids failed for d before now.
func (w *world) failed(d time.Duration, ids ...string) *world {
	for _, id := range ids {
		m := w.in.Members[id]
		m.Status, m.Since = gossip.StatusFailed, w.in.Now.Add(-d)
		w.in.Members[id] = m
	}
	return w
}

func (w *world) absent(ids ...string) *world {
	for _, id := range ids {
		delete(w.in.Members, id)
	}
	return w
}

func (w *world) left(ids ...string) *world {
	for _, id := range ids {
		m := w.in.Members[id]
		m.Status, m.Since = gossip.StatusLeft, w.in.Now
		w.in.Members[id] = m
	}
	return w
}

func (w *world) healthy(d time.Duration, ids ...string) *world {
	for _, id := range ids {
		w.in.HealthySince[id] = w.in.Now.Add(-d)
	}
	return w
}

// removed records an operator's RemoveServer of id d before now.
func (w *world) removed(d time.Duration, id string) *world {
	if w.in.Removed == nil {
		w.in.Removed = map[string]time.Time{}
	}
	w.in.Removed[id] = w.in.Now.Add(-d)
	return w
}

func (w *world) minQuorum(q int) *world { w.in.Rules.MinQuorum = q; return w }

// enabled latches level; members announce level 0 unless set.
func (w *world) enabled(level uint32) *world { w.in.Enabled = level; return w }

func rm(ids ...string) []string { return ids }

func Test_ReconcileDecide(t *testing.T) {
	type want struct {
		add, promote, remove []string
	}
	cases := []struct {
		name string
		w    *world
		want want
	}{
		// Dead-server cleanup never drops below quorum.
		{"3 voters, 1 failed past timeout: kept at MinQuorum 3", newWorld(3, 0).failed(2*time.Minute, "n3"), want{}},
		{"3 voters, 2 failed past timeout: kept", newWorld(3, 0).failed(2*time.Minute, "n2", "n3"), want{}},
		{"3 voters, 1 failed, MinQuorum 2: removed", newWorld(3, 0).minQuorum(2).failed(2*time.Minute, "n3"), want{remove: rm("n3")}},
		{"3 voters, 2 failed, MinQuorum 1: only (3-1)/2 = 1 per round", newWorld(3, 0).minQuorum(1).failed(2*time.Minute, "n2", "n3"), want{remove: rm("n2")}},
		{"5 voters, 1 failed past timeout: removed", newWorld(5, 0).failed(2*time.Minute, "n4"), want{remove: rm("n4")}},
		{"5 voters, 1 failed within timeout: kept", newWorld(5, 0).failed(30*time.Second, "n4"), want{}},
		{"5 voters, 2 failed: both, down to 3", newWorld(5, 0).failed(2*time.Minute, "n4", "n5"), want{remove: rm("n4", "n5")}},
		{"5 voters, 3 failed: 2 at most, never below 3", newWorld(5, 0).failed(2*time.Minute, "n3", "n4", "n5"), want{remove: rm("n3", "n4")}},
		{"5 voters, 3 failed, oldest failure first", newWorld(5, 0).failed(5*time.Minute, "n5").failed(3*time.Minute, "n2").failed(2*time.Minute, "n3"), want{remove: rm("n5", "n2")}},
		{"5 voters, MinQuorum 5: nothing removed", newWorld(5, 0).minQuorum(5).failed(2*time.Minute, "n5"), want{}},
		{"4 voters after a loss, 1 failed: down to 3", newWorld(4, 0).failed(2*time.Minute, "n4"), want{remove: rm("n4")}},
		{"no member entry: left alone (reconcileOnce fills absent servers in as failed)", newWorld(5, 0).absent("n5"), want{}},
		{"leader is never removed", newWorld(5, 0).failed(2*time.Minute, "n1"), want{}},

		// Leaves.
		{"3 voters, 1 left: removed, not bound by MinQuorum", newWorld(3, 0).left("n3"), want{remove: rm("n3")}},
		{"5 voters, 3 left: 2 per round", newWorld(5, 0).left("n3", "n4", "n5"), want{remove: rm("n3", "n4")}},
		{"left non-voter removed whatever the cap", newWorld(3, 2).left("n4", "n5").failed(2*time.Minute, "n3").minQuorum(1), want{remove: rm("n4", "n5", "n3")}},

		// Non-voter first, promotion when caught up and stable.
		{"new alive member is added as non-voter", newWorld(3, 0).member("n9", addr(9), gossip.StatusAlive, t0), want{add: rm("n9")}},
		// An operator's remove of a stopped server that gossip still shows
		// alive (it has not noticed the stop yet): not added straight back.
		{"removed by an operator, still alive in gossip: not re-added", newWorld(3, 0).member("n9", addr(9), gossip.StatusAlive, t0).removed(time.Second, "n9"), want{}},
		{"removed, hold over: re-added", newWorld(3, 0).member("n9", addr(9), gossip.StatusAlive, t0).removed(2*time.Minute, "n9"), want{add: rm("n9")}},
		{"removed, then restarted (alive since after the remove): re-added", newWorld(3, 0).removed(time.Second, "n9").member("n9", addr(9), gossip.StatusAlive, t0.Add(time.Hour)), want{add: rm("n9")}},
		{"failed stranger is not added", newWorld(3, 0).member("n9", addr(9), gossip.StatusFailed, t0), want{}},
		{"member on a build below the latched level is not added", newWorld(3, 0).member("n9", addr(9), gossip.StatusAlive, t0).enabled(5), want{}},
		{"non-voter not healthy: not promoted", newWorld(3, 1), want{}},
		{"non-voter healthy but not yet stable", newWorld(3, 1).healthy(5*time.Second, "n4"), want{}},
		{"non-voter stable: promoted", newWorld(3, 1).healthy(10*time.Second, "n4"), want{promote: rm("n4")}},
		{"stable but failed in gossip: not promoted", newWorld(3, 1).healthy(time.Minute, "n4").failed(time.Second, "n4"), want{}},
		{"never promote and demote in one round", newWorld(5, 1).healthy(time.Minute, "n6").failed(2*time.Minute, "n5"), want{remove: rm("n5")}},
		{"removing a non-voter does not block promotion", newWorld(3, 2).healthy(time.Minute, "n4").left("n5"), want{remove: rm("n5"), promote: rm("n4")}},

		// A wiped server back under a new id on the same address.
		{"old id holding the address is removed before the add", newWorld(5, 0).failed(time.Second, "n5").member("n5b", addr(5), gossip.StatusAlive, t0), want{remove: rm("n5")}},
		{"same, in a 3-voter cluster at MinQuorum: waits for an operator", newWorld(3, 0).failed(time.Second, "n3").member("n3b", addr(3), gossip.StatusAlive, t0), want{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got want
			for _, a := range decide(c.w.in) {
				switch a.Kind {
				case actAddNonvoter:
					got.add = append(got.add, a.ID)
				case actPromote:
					got.promote = append(got.promote, a.ID)
				case actRemove:
					got.remove = append(got.remove, a.ID)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got add %v promote %v remove %v; want add %v promote %v remove %v",
					got.add, got.promote, got.remove, c.want.add, c.want.promote, c.want.remove)
			}
			// The invariant behind the cases: voters left after the
			// round's failed removals stay at MinQuorum or more, and no
			// round removes more than (voters-1)/2 voters.
			voters, removedVoters := 0, 0
			for _, s := range c.w.in.Servers {
				if s.Suffrage == raft.Voter {
					voters++
					for _, id := range got.remove {
						if id == string(s.ID) {
							removedVoters++
						}
					}
				}
			}
			if removedVoters > (voters-1)/2 {
				t.Fatalf("removed %d of %d voters in one round", removedVoters, voters)
			}
		})
	}
}
