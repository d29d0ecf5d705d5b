package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/internal/testwait"
)

// Test_FollowerLogFailureDoesNotStopReplication: a follower whose log
// append fails answers AppendEntries with Success=false. With raft's
// pipelined replication (NetworkTransport's default of 2 RPCs in flight)
// that answer could leave the leader's replication goroutine for that
// follower blocked for good on the pipeline's unbuffered channels: the
// follower kept getting heartbeats, so nobody held an election, and it
// never received another entry; the leader's Shutdown then hung waiting
// for that goroutine (seen as a 20-minute test timeout). Replication must
// resume once the follower's disk works again.
func Test_FollowerLogFailureDoesNotStopReplication(t *testing.T) {
	nodes, logsOf := nodetest.ClusterFailingLogs(t)
	l := nodetest.LeaderOf(t, nodes)
	var f *cluster.Node
	for _, n := range nodes {
		if n != l {
			f = n
			break
		}
	}
	bad := logsOf(f.ID())
	t.Cleanup(func() { bad.On.Store(false) })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for round := range 10 {
		bad.On.Store(true)
		// Concurrent proposals keep the leader's replication triggered,
		// which is when the blocked send happened.
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 { // committed by the leader and the other follower
					if _, err := l.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", "x")); err != nil {
						t.Errorf("round %d: propose with one follower failing: %v", round, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		bad.On.Store(false)
		if _, err := l.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", "after")); err != nil {
			t.Fatalf("round %d propose after: %v", round, err)
		}
		want := l.FSM().AppliedIndex()
		testwait.For(t, 10*time.Second, "the follower to catch up", func() bool {
			return f.FSM().AppliedIndex() >= want
		})
	}
}

// Test_LeaderShutdownUnderLoadReturns: a leader shut down while it
// replicates under load stops. With pipelined replication a stop could
// leave a replication goroutine blocked for good (its decoder gone, the
// next send waiting to hand over), and Shutdown waited for it forever.
func Test_LeaderShutdownUnderLoadReturns(t *testing.T) {
	for round := range 5 {
		nodes := nodetest.Cluster(t, 3)
		l := nodetest.LeaderOf(t, nodes)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 200 && ctx.Err() == nil; i++ {
					_, _ = l.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", "x"))
				}
			}()
		}
		testwait.For(t, 10*time.Second, "load", func() bool { return l.FSM().AppliedIndex() > 50 })
		done := make(chan error, 1)
		go func() {
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			done <- l.Shutdown(sctx)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: leader shutdown under load did not return in 30 s", round)
		}
		cancel()
		wg.Wait()
	}
}
