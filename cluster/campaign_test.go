package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/gossip"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/internal/testwait"
)

// A node restarted from existing data serves nothing until a consistency
// check passes on it, and it must not lead while a checked voter is alive
// either: a keyspace Pebble opened without complaint (a damaged MANIFEST,
// rolled back to an older state) was elected leader before any check
// could catch it. The restarted node
// here has the shortest election timeout, so without the gate it wins the
// election that follows the leader's stop; with it, the checked voter
// leads, and the restarted node passes that leader's check.
func Test_UncheckedNodeDoesNotCampaignWhileACheckedVoterLives(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// No checks at all: the restarted node stays unchecked.
	nodes := nodetest.ClusterJoined(t, 3, func(c *cluster.Config) { c.CheckInterval = -1 })
	l := nodetest.LeaderOf(t, nodes)
	nodetest.ProposeOK(t, l, "before")
	var others []*cluster.Node
	for _, n := range nodes {
		if n != l {
			others = append(others, n)
		}
	}
	checked, restarted := others[0], others[1]
	// "Existing data" is a term or an entry on disk: a follower that had
	// not heard from the leader yet (a loaded machine) restarted as new.
	testwait.For(t, 10*time.Second, "the restarted node to apply the leader's entries", func() bool {
		return restarted.FSM().AppliedIndex() >= l.FSM().AppliedIndex()
	})
	cfg := restarted.Internals().Config
	if err := restarted.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 60*time.Millisecond, 60*time.Millisecond, 50*time.Millisecond
	cfg.CampaignHold = time.Minute
	again, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = again.Shutdown(context.Background()) })
	if err := again.CheckErr(); err == nil {
		t.Fatal("a node restarted from existing data serves before any check")
	}
	testwait.For(t, 10*time.Second, "the restarted node sees the checked voter alive in gossip", func() bool {
		for _, m := range again.Internals().Gossip.Members() {
			if m.ID == checked.ID() && m.Status == gossip.StatusAlive && m.HasState && !m.Unchecked {
				return true
			}
		}
		return false
	})
	// The leader's Raft stops as in a crash: no leadership transfer.
	if err := again.CheckErr(); err == nil {
		t.Fatal("the restarted node passed a check, though no leader runs any")
	}
	if err := l.Internals().Raft.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "a new leader", func() bool { return checked.IsLeader() || again.IsLeader() })
	if again.IsLeader() {
		t.Fatalf("%s led before any check passed on it while %s, checked, was alive", again.ID(), checked.ID())
	}
	// Its election timer fired several times before the checked voter's
	// did; it asked nobody for a vote.
	if n := cluster.VoteRequestsAsked(again); n != 0 {
		t.Fatalf("%s sent %d vote requests while unchecked, with a checked voter alive", again.ID(), n)
	}
}

// The hold ends: a checked voter that cannot win (its log is behind, so
// this node refuses it its vote) would otherwise leave the cluster
// without a leader for ever.
func Test_CampaignHoldEnds(t *testing.T) {
	cfg := nodetest.Config(t, "n1", 1)
	cfg.CampaignHold = 200 * time.Millisecond
	n := nodetest.Start(t, cfg)
	if err := cluster.HoldCampaign(n, "n2"); err == nil {
		t.Fatal("the first vote request of an episode was sent")
	}
	testwait.For(t, 5*time.Second, "the hold to end", func() bool { return cluster.HoldCampaign(n, "n2") == nil })
}
