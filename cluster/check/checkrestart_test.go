package check_test

import (
	"context"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// A restarted voter replays the checks in its log. Their leaders' terms
// are over, so nobody collects those hashes; hashing them at full speed
// (a restarted voter awaits a check) made the voter skip the new leader's
// urgent check, and the leader then waited out CheckTimeout before the
// cluster served again (30 s after restarting a 3-node cluster with one
// node absent). A check of an earlier term is not hashed; the new
// leader's check is, on every restarted voter.
func Test_RestartedVoterSkipsChecksOfEarlierTerms(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := nodetest.ClusterWith(t, 3, func(c *cluster.Config) { c.CheckInterval = -1 })
	l := nodetest.LeaderOf(t, nodes)
	// The lagging voter stops first and misses the checks below: after the
	// restart it receives them from the others' logs.
	lagging := nodetest.FollowerOf(nodes, l)
	lagCfg := lagging.Internals().Config
	if err := lagging.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var old []uint64
	for i := 0; i < 3; i++ {
		nodetest.ProposeOK(t, l, "before-restart")
		res, err := l.Internals().Propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CHECK, Body: &pb.Command_Check{Check: &pb.CheckCmd{Urgent: true}}})
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, res.GetIndex())
	}
	cfgs := []cluster.Config{l.Internals().Config, lagCfg}
	for _, n := range nodes {
		if n != lagging {
			if err := n.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The old leader and the lagging voter come back; the third stays down.
	var back []*cluster.Node
	for _, cfg := range cfgs {
		n, err := cluster.New(cfg)
		if err != nil {
			t.Fatalf("restart %s: %v", cfg.ID, err)
		}
		t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
		back = append(back, n)
	}
	testwait.For(t, 10*time.Second, "a leader among the restarted", func() bool { return back[0].IsLeader() || back[1].IsLeader() })
	nl := nodetest.LeaderOf(t, back)
	res, err := nl.Internals().Propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CHECK, Body: &pb.Command_Check{Check: &pb.CheckCmd{Urgent: true}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range back {
		testwait.For(t, 10*time.Second, n.ID()+" hashed the new leader's check", func() bool { return n.CheckHash(res.GetIndex()) != "" })
		for _, i := range old {
			if n.CheckHash(i) != "" {
				t.Errorf("%s hashed check %d of an earlier term on replay", n.ID(), i)
			}
		}
	}
}
