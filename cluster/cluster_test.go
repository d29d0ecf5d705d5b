package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

func Test_ThreeNodeReplicationConverges(t *testing.T) {
	nodes := nodetest.Cluster(t, 3)
	l := nodetest.LeaderOf(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 50; i++ {
		res, err := l.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", fmt.Sprint(i)))
		if err != nil {
			t.Fatalf("propose %d: %v", i, err)
		}
		if len(res.GetItems()) != 1 || res.GetItems()[0].GetCode() != pb.Code_CODE_OK {
			t.Fatalf("propose %d: %v", i, res)
		}
	}
	// The leader may apply entries of its own after the last proposal (the
	// feature latch, a tick), so the replicas are compared once they agree
	// on everything applied: a divergence never does.
	testwait.Until(t, 10*time.Second, "every replica's hash to equal the leader's", func() string {
		return nodetest.Divergence(t, l, nodes)
	})
}

func Test_FollowerProposeIsNotLeader(t *testing.T) {
	nodes := nodetest.Cluster(t, 3)
	l := nodetest.LeaderOf(t, nodes)
	for _, n := range nodes {
		if n == l {
			continue
		}
		// A server just added learns the leader on its first AppendEntries.
		testwait.For(t, 5*time.Second, n.ID()+" to learn the leader", func() bool { id, _ := n.Leader(); return id != "" })
		_, err := n.Service().Propose(context.Background(), nodetest.EnqueueCmd("jobs", "x"))
		var nle *replica.NotLeaderError
		if !errors.As(err, &nle) || nle.LeaderID != l.ID() {
			t.Fatalf("%s: got %v, want replica.NotLeaderError naming %s", n.ID(), err, l.ID())
		}
	}
}

// A linearizable read must not wait forever when the newest entries are
// ones the FSM never sees (the leader's no-op and Barrier).
func Test_ReadBarrierAfterBarrierEntry(t *testing.T) {
	nodes := nodetest.Cluster(t, 3)
	l := nodetest.LeaderOf(t, nodes)
	if err := l.Internals().Raft.Barrier(time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := l.ReadBarrier(ctx); err != nil {
		t.Fatalf("read barrier after a Barrier entry: %v", err)
	}
}
