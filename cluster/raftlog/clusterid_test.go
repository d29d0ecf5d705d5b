package raftlog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cmd/docket/tlsgen"
	"github.com/dockethq/docket/internal/testwait"
)

// identityCluster is a TLS cluster of size nodes named prefix1..prefixN
// under pki, joined over gossip, each knowing the cluster's id.
func identityCluster(t *testing.T, pki *testPKI, prefix string, size int) []*cluster.Node {
	t.Helper()
	var nodes []*cluster.Node
	for i := 1; i <= size; i++ {
		id := fmt.Sprintf("%s%d", prefix, i)
		expect := 0
		if i == 1 {
			expect = 1
		}
		c := nodetest.Config(t, id, expect)
		c.CheckInterval = -1
		c.TLS = pki.reloader(tlsgen.CertOptions{Name: id, Server: true})
		c.RaftHandshakeTimeout = 300 * time.Millisecond
		if i > 1 {
			c.Join = []string{nodes[0].GossipAddr()}
		}
		n := nodetest.Start(t, c)
		if i == 1 {
			testwait.For(t, 5*time.Second, id+" leader", n.IsLeader)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := nodes[0].AddServer(ctx, n.ID(), n.Internals().Config.RaftAddr, "", false)
			cancel()
			if err != nil {
				t.Fatalf("add %s: %v", id, err)
			}
		}
		nodes = append(nodes, n)
	}
	testwait.For(t, 10*time.Second, prefix+" cluster named on every node", func() bool {
		for _, n := range nodes {
			if n.ClusterID() == "" || n.ClusterID() != nodes[0].ClusterID() {
				return false
			}
		}
		return true
	})
	// Gossip refuses by the ids members announce, which each node does
	// within a discovery tick of learning it.
	testwait.For(t, 10*time.Second, prefix+" nodes announce the id in gossip", func() bool {
		for _, n := range nodes {
			seen := 0
			for _, m := range n.Internals().Gossip.Members() {
				if m.Cluster == nodes[0].ClusterID() {
					seen++
				}
			}
			if seen < len(nodes)-1 {
				return false
			}
		}
		return true
	})
	return nodes
}

// Two clusters under one CA (a company CA, or staging beside production)
// with their addresses crossed: each leader is told that a server of the
// other cluster is its voter, and a server of each joins the other's
// gossip. Neither accepts the other: Raft's handshake fails on the id, the
// gossip join is refused, and each cluster keeps its own id and log. Before
// ids, the node taken over was sent the other cluster's snapshot and its
// own cluster lost a voter.
func Test_TwoClustersOneCANeverMerge(t *testing.T) {
	pki := newTestPKI(t)
	a := identityCluster(t, pki, "a", 3)
	b := identityCluster(t, pki, "b", 3)
	idA, idB := a[0].ClusterID(), b[0].ClusterID()
	if idA == idB {
		t.Fatalf("two clusters minted one id %q", idA)
	}
	leaderA, leaderB := nodetest.LeaderOf(t, a), nodetest.LeaderOf(t, b)
	victimB, victimA := nodetest.FollowerOf(b, leaderB), nodetest.FollowerOf(a, leaderA)

	// Raft: each leader adds a server of the other cluster as a voter.
	for _, x := range []struct{ leader, victim *cluster.Node }{{leaderA, victimB}, {leaderB, victimA}} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_ = x.leader.AddServer(ctx, "x-"+x.victim.ID(), x.victim.Internals().Config.RaftAddr, "", false) // it may not commit
		cancel()
	}
	testwait.For(t, 15*time.Second, "both victims refused the other leader, or were taken over", func() bool {
		taken := victimB.ClusterID() != idB || victimA.ClusterID() != idA
		return taken || (victimB.Internals().Ident.Refused() >= 3 && victimA.Internals().Ident.Refused() >= 3)
	})
	if victimB.ClusterID() != idB || victimA.ClusterID() != idA {
		t.Fatalf("a server was taken over by the other cluster: %s now in %q (was %s), %s in %q (was %s)",
			victimB.ID(), victimB.ClusterID(), idB, victimA.ID(), victimA.ClusterID(), idA)
	}

	// Gossip: a server of each joins the other's pool.
	if _, err := victimB.Internals().Gossip.Join([]string{leaderA.GossipAddr()}); err == nil {
		t.Errorf("%s joined cluster %s's gossip from cluster %s", victimB.ID(), idA, idB)
	}
	for _, m := range leaderA.Internals().Gossip.Members() {
		if m.ID[0] == 'b' {
			t.Errorf("cluster a's pool holds %s of cluster b", m.ID)
		}
	}
	for _, m := range victimB.Internals().Gossip.Members() {
		if m.ID[0] == 'a' {
			t.Errorf("cluster b's pool holds %s of cluster a", m.ID)
		}
	}

	// Each cluster still has its own id and serves writes to all its nodes.
	for _, c := range []struct {
		nodes []*cluster.Node
		id    string
	}{{a, idA}, {b, idB}} {
		l := nodetest.LeaderOf(t, c.nodes)
		task := nodetest.ProposeOK(t, l, "after-crossing")
		for _, n := range c.nodes {
			if got := n.ClusterID(); got != c.id {
				t.Fatalf("%s's cluster id is %q, was %q", n.ID(), got, c.id)
			}
			testwait.For(t, 10*time.Second, n.ID()+" applies its own cluster's write", func() bool {
				_, err := n.FSM().GetTask(task)
				return err == nil
			})
		}
	}
}
