package main

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/gossip"
	"github.com/dockethq/docket/internal/testwait"
)

func mustGossipKey(t *testing.T) []byte {
	t.Helper()
	s, err := gossip.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := gossip.ParseKeys(s)
	if err != nil {
		t.Fatal(err)
	}
	return k[0]
}

// suffrage is id's suffrage in n's latest configuration, "" when absent.
func suffrage(n *sysNode, id string) string {
	for _, s := range n.node.Status().GetServers() {
		if s.GetId() == id {
			return s.GetSuffrage()
		}
	}
	return ""
}

func voters(n *sysNode) int {
	c := 0
	for _, s := range n.node.Status().GetServers() {
		if s.GetSuffrage() == "voter" {
			c++
		}
	}
	return c
}

// fastMembership makes the reconcile rules quick enough for a test.
func fastMembership(c *cluster.Config) {
	c.ReconcileInterval = 100 * time.Millisecond
	c.ServerStabilizationTime = 500 * time.Millisecond
	c.MaxTrailingLogs = 5
}

// startNewNode starts one more server that joins nodes through gossip.
func startNewNode(t *testing.T, nodes []*sysNode, id string, tune func(*cluster.Config)) *sysNode {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &sysNode{t: t, id: id, dir: filepath.Join(t.TempDir(), id), raftAddr: "127.0.0.1:0", grpcAddr: l.Addr().String(),
		tune: tune, join: gossipAddrsOf(nodes)}
	n.start(l)
	t.Cleanup(n.stop)
	return n
}

// Test_NewNodeIsNonvoterUntilCaughtUp: a server that joins through gossip
// is added as a non-voter, stays one while it cannot catch up (its log
// appends fail), and is promoted once it has caught up and stayed healthy
// for the stabilization time.
func Test_NewNodeIsNonvoterUntilCaughtUp(t *testing.T) {
	nodes := startCluster(t, 3, fastMembership)
	c := mustClient(t, addrsOf(nodes)...)
	for i := 0; i < 30; i++ {
		if _, err := c.EnqueueOne(testCtx(t), "jobs", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	var stuck atomic.Pointer[failingLog]
	n4 := startNewNode(t, nodes, "n4", func(cfg *cluster.Config) {
		fastMembership(cfg)
		cfg.WrapLogStore = func(s raft.LogStore) raft.LogStore {
			f := &failingLog{LogStore: s}
			f.on.Store(true) // cannot catch up until the test says so
			stuck.Store(f)
			return f
		}
	})
	leader := waitLeader(t, nodes)
	testwait.For(t, 10*time.Second, "n4 to be added", func() bool { return suffrage(leader, "n4") != "" })
	if s := suffrage(leader, "n4"); s != "nonvoter" {
		t.Fatalf("n4 joined as %q, want nonvoter", s)
	}
	// Six stabilization times: a rule that promoted without catching up
	// would have done it by now.
	holdsFor(t, 3*time.Second, func() {
		if s := suffrage(waitLeader(t, nodes), "n4"); s != "nonvoter" {
			t.Fatalf("n4 became %q while it could not catch up (applied %d)", s, n4.node.FSM().AppliedIndex())
		}
	})
	if n4.node.FSM().AppliedIndex() >= leader.node.FSM().AppliedIndex() {
		t.Fatal("n4 caught up although its appends fail: the test shows nothing")
	}
	stuck.Load().on.Store(false)
	testwait.For(t, 15*time.Second, "n4 to be promoted", func() bool { return suffrage(waitLeader(t, nodes), "n4") == "voter" })
	l := waitLeader(t, nodes)
	if lag := int64(l.node.FSM().AppliedIndex()) - int64(n4.node.FSM().AppliedIndex()); lag > 5+10 {
		t.Fatalf("n4 promoted %d entries behind", lag)
	}
	if _, err := c.EnqueueOne(testCtx(t), "jobs", []byte("after")); err != nil {
		t.Fatalf("write after the promotion: %v", err)
	}
}

// Test_GracefulLeaveOfTheLeader: the leader, stopped with
// LeaveOnTerminate (docket agent --leave-on-terminate and SIGTERM), hands
// leadership over and leaves the configuration; the others keep a leader
// and take writes.
func Test_GracefulLeaveOfTheLeader(t *testing.T) {
	nodes := startCluster(t, 3, func(c *cluster.Config) {
		fastMembership(c)
		c.LeaveOnTerminate = c.ID == "n3"
	})
	l := waitLeader(t, nodes)
	if l.id != "n3" {
		if _, err := l.node.TransferLeadership(testCtx(t), "n3"); err != nil {
			t.Fatal(err)
		}
	}
	n3 := nodes[2]
	testwait.For(t, 10*time.Second, "n3 to lead", n3.node.IsLeader)
	start := time.Now()
	n3.stop()
	t.Logf("leave and stop took %v", time.Since(start))
	rest := nodes[:2]
	nl := waitLeader(t, rest)
	testwait.For(t, 10*time.Second, "n3 out of the configuration", func() bool { return suffrage(waitLeader(t, rest), "n3") == "" })
	if v := voters(nl); v != 2 {
		t.Fatalf("%d voters after the leave, want 2", v)
	}
	c := mustClient(t, addrsOf(rest)...)
	if _, err := c.EnqueueOne(testCtx(t), "jobs", []byte("after the leave")); err != nil {
		t.Fatalf("write after the leader left: %v", err)
	}
}

// Test_RestartIsNotALeave: a server stopped without LeaveOnTerminate stays
// a voter while it is down (a rolling restart never shrinks the cluster)
// and is a voter again after its restart.
func Test_RestartIsNotALeave(t *testing.T) {
	nodes := startCluster(t, 3, fastMembership)
	l := waitLeader(t, nodes)
	f := followers(nodes, l)[0]
	f.stop()
	// Many reconcile rounds (100 ms each) with the server down.
	holdsFor(t, time.Second, func() {
		if s := suffrage(waitLeader(t, nodes), f.id); s != "voter" {
			t.Fatalf("%s is %q while restarting", f.id, s)
		}
	})
	f.start(nil)
	waitKnowLeader(t, nodes)
	if s := suffrage(waitLeader(t, nodes), f.id); s != "voter" {
		t.Fatalf("%s is %q after its restart", f.id, s)
	}
}

// Test_DeadServersRemovedDownToMinQuorum: in a 5-server cluster two
// servers crash; after DeadServerTimeout both are removed (3 voters left,
// the minimum quorum), writes go on, and fresh servers that join are
// promoted.
func Test_DeadServersRemovedDownToMinQuorum(t *testing.T) {
	tune := func(c *cluster.Config) {
		fastMembership(c)
		c.DeadServerTimeout = time.Second
	}
	nodes := startCluster(t, 5, tune)
	l := waitLeader(t, nodes)
	fs := followers(nodes, l)
	fs[0].crash()
	fs[1].crash()
	live := []*sysNode{l, fs[2], fs[3]}
	testwait.For(t, 20*time.Second, "the two dead servers to be removed", func() bool {
		ll := waitLeader(t, live)
		return suffrage(ll, fs[0].id) == "" && suffrage(ll, fs[1].id) == ""
	})
	if v := voters(waitLeader(t, live)); v != 3 {
		t.Fatalf("%d voters, want 3", v)
	}
	c := mustClient(t, addrsOf(live)...)
	if _, err := c.EnqueueOne(testCtx(t), "jobs", []byte("after the losses")); err != nil {
		t.Fatal(err)
	}
	n6 := startNewNode(t, live, "n6", tune)
	testwait.For(t, 15*time.Second, "n6 to be promoted", func() bool { return suffrage(waitLeader(t, live), n6.id) == "voter" })
}

// Test_ServerOutsideGossipThatAnswersIsKept: during an upgrade across the
// move to gossip, old servers never gossip but still answer Status. A
// voter the leader cannot see in gossip (here: it gossips with another
// key) but that answers Status is not removed as dead, even with cleanup
// allowed down to one voter.
func Test_ServerOutsideGossipThatAnswersIsKept(t *testing.T) {
	tune := func(c *cluster.Config) {
		fastMembership(c)
		c.DeadServerTimeout = 300 * time.Millisecond
		c.MinQuorum = 1
	}
	nodes := startCluster(t, 2, tune)
	l := waitLeader(t, nodes)
	other := mustGossipKey(t)
	n3 := startNewNode(t, nodes, "n3", func(c *cluster.Config) { tune(c); c.GossipKeys = [][]byte{other} })
	if err := l.node.AddServer(testCtx(t), "n3", n3.raftAddr, n3.grpcAddr, false); err != nil {
		t.Fatal(err)
	}
	holdsFor(t, 2*time.Second, func() { // 6 dead-server timeouts
		if s := suffrage(l, "n3"); s != "voter" {
			t.Fatalf("n3, outside gossip but answering, is %q", s)
		}
	})
	n3.crash() // now it answers nothing: dead, and removed
	testwait.For(t, 5*time.Second, "the dead n3 to be removed", func() bool { return suffrage(l, "n3") == "" })
}

// Test_ClusterLeaveRPC is `docket cluster leave`: the node called leaves
// the configuration, and its Left channel tells its agent to stop.
func Test_ClusterLeaveRPC(t *testing.T) {
	nodes := startCluster(t, 3, fastMembership)
	l := waitLeader(t, nodes)
	f := followers(nodes, l)[0]
	c := mustClient(t, addrsOf(nodes)...)
	if err := c.Leave(testCtx(t), f.grpcAddr); err != nil {
		t.Fatalf("leave: %v", err)
	}
	select {
	case <-f.node.Left():
	default:
		t.Fatal("Leave answered before the node left")
	}
	if s := suffrage(waitLeader(t, nodes), f.id); s != "" {
		t.Fatalf("%s is still %q after leaving", f.id, s)
	}
	f.stop()
	if _, err := c.EnqueueOne(testCtx(t), "jobs", []byte("after")); err != nil {
		t.Fatal(err)
	}
}

// Test_LeaveCompletesWhenTheRemovalNeverReachesTheLeaver: the leader stops
// replicating to a server as soon as it appends the configuration without
// it, so the leaving server may never store that entry. Leave waited for
// its own configuration to drop it and hung (the long chaos run's n4
// campaigned for seven minutes); it must also accept its peers' word.
// Here the leaver's log writes fail from the moment it asks to leave.
func Test_LeaveCompletesWhenTheRemovalNeverReachesTheLeaver(t *testing.T) {
	var mu sync.Mutex
	logs := map[string]*failingLog{}
	nodes := startCluster(t, 3, func(c *cluster.Config) {
		fastMembership(c)
		id := c.ID
		c.WrapLogStore = func(s raft.LogStore) raft.LogStore {
			f := &failingLog{LogStore: s}
			mu.Lock()
			logs[id] = f
			mu.Unlock()
			return f
		}
	})
	l := waitLeader(t, nodes)
	f := followers(nodes, l)[0]
	mu.Lock()
	stuck := logs[f.id]
	mu.Unlock()
	stuck.on.Store(true)
	t.Cleanup(func() { stuck.on.Store(false) })
	c := mustClient(t, addrsOf(nodes)...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Leave(ctx, f.grpcAddr); err != nil {
		t.Fatalf("leave of a server that cannot store its removal: %v", err)
	}
	// The node that answers as leader may be one about to learn of a newer
	// term (under load it was, once): ask until the configuration shows
	// the leaver gone, as the promotion wait above does.
	testwait.For(t, 10*time.Second, f.id+" out of the leader's configuration after leaving", func() bool {
		return suffrage(waitLeader(t, nodes), f.id) == ""
	})
	if f.node.FSM().AppliedIndex() >= waitLeader(t, nodes).node.FSM().AppliedIndex() {
		t.Fatal("the leaver applied everything: the test shows nothing")
	}
}
