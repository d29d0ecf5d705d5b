package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
)

// Test_TransferToADeadNodeSaysSo: a leadership transfer to a server that
// is down ends with ErrTransferTimedOut, which names what happened and
// that this node still leads, rather than Raft's bare "leadership
// transfer timeout" (which reached clients as Internal).
func Test_TransferToADeadNodeSaysSo(t *testing.T) {
	nodes := nodetest.Cluster(t, 3)
	l := nodetest.LeaderOf(t, nodes)
	dead := nodetest.FollowerOf(nodes, l)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dead.Shutdown(ctx); err != nil {
		t.Fatalf("shut %s down: %v", dead.ID(), err)
	}
	_, err := l.TransferLeadership(ctx, dead.ID())
	if !errors.Is(err, cluster.ErrTransferTimedOut) {
		t.Fatalf("transfer to the dead %s: %v, want ErrTransferTimedOut", dead.ID(), err)
	}
	if !l.IsLeader() {
		t.Fatalf("%s lost leadership to a dead target", l.ID())
	}
}
