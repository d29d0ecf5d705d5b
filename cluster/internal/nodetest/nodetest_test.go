package nodetest_test

import (
	"testing"

	"github.com/dockethq/docket/cluster/internal/nodetest"
)

// The harness's cluster is one Raft cluster: one leader, every node a
// voter that applies what the leader proposes.
func Test_ClusterReplicates(t *testing.T) {
	nodes := nodetest.Cluster(t, 3)
	l := nodetest.LeaderOf(t, nodes)
	id := nodetest.ProposeOK(t, l, "x")
	for _, n := range nodes {
		if n != l && n.IsLeader() {
			t.Fatalf("%s and %s both lead", n.ID(), l.ID())
		}
	}
	f := nodetest.FollowerOf(nodes, l)
	nodetest.WaitApplied(t, f, l.FSM().AppliedIndex())
	if _, err := f.FSM().GetTask(id); err != nil {
		t.Fatalf("follower %s lacks task %s: %v", f.ID(), id, err)
	}
}
