package cluster

import (
	"context"

	"github.com/dockethq/docket/cluster/leader"
	"github.com/dockethq/docket/cluster/membership"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// leaderRun owns one term's leader loops.
type leaderRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// followLeadership starts the leader-only loops when this node wins and
// stops all of them when it loses, driven by Raft's NotifyCh.
func (n *Node) followLeadership(notify <-chan bool) {
	defer n.wg.Done()
	var run *leaderRun
	stopLoops := func() {
		if run != nil {
			run.cancel()
			<-run.done
			run = nil
			n.log.Info("leader loops stopped")
		}
	}
	defer stopLoops()
	for {
		select {
		case <-n.ctx.Done():
			return
		case isLeader := <-notify:
			plantLeader(isLeader)
			if !isLeader {
				stopLoops()
				continue
			}
			if run != nil {
				continue
			}
			ctx, cancel := context.WithCancel(n.ctx)
			run = &leaderRun{cancel: cancel, done: make(chan struct{})}
			go func(done chan struct{}) {
				defer close(done)
				n.leaderLoop(ctx)
			}(run.done)
		}
	}
}

// leaderLoop catches up with a Barrier, latches the feature level and
// names the cluster, then runs the leader's loops (package leader) with
// membership reconcile and the consistency checks until ctx ends.
func (n *Node) leaderLoop(ctx context.Context) {
	n.log.Info("leader loops starting")
	// Everything committed by earlier leaders is applied locally once the
	// barrier returns, so scans below see the whole history.
	for {
		term := n.raft.CurrentTerm()
		// A Barrier's future carries no shutdown channel: if Raft stops
		// before the FSM applies it, it never resolves. Waiting on ctx too
		// lets Shutdown end this loop (a CI run hung here for 20 minutes).
		err := membership.WaitFuture(ctx, n.raft.Barrier(n.cfg.ApplyTimeout))
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			n.readyTerm.Store(term)
			break
		}
		n.log.Warn("leader barrier failed", "err", err)
		if !replica.Sleep(ctx, n.cfg.ReapInterval) {
			return
		}
	}
	if err := n.latchOnce(ctx); err != nil && ctx.Err() == nil {
		n.log.Warn("feature level latch failed", "err", err)
	}
	if err := n.nameClusterOnce(ctx); err != nil && ctx.Err() == nil {
		n.log.Warn("naming the cluster failed", "err", err)
	}
	latch := leader.Task{Name: "latch", Every: service.LatchInterval, Run: func(ctx context.Context) error {
		if err := n.latchOnce(ctx); err != nil {
			return err
		}
		return n.nameClusterOnce(ctx) // once every server applies it
	}}
	n.loops().Run(ctx, []leader.Task{latch}, n.reconcileLoop, n.check.Loop)
}

// loops are the leader's housekeeping over this node.
func (n *Node) loops() *leader.Loops {
	c := n.cfg
	return leader.New(leaderHost{Service: n.svc, Node: n}, leader.Config{Log: n.log, ApplyTimeout: c.ApplyTimeout, ReapInterval: c.ReapInterval,
		ReapGrace: c.ReapGrace, PromoteInterval: c.PromoteInterval, PurgeInterval: c.PurgeInterval,
		ScheduleInterval: c.ScheduleInterval, BootstrapSecret: c.BootstrapSecret})
}

// propose runs a housekeeping command with a bounded wait and turns a
// whole-command rejection into an error.
func (n *Node) propose(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	return leader.Propose(ctx, n.svc, n.cfg.ApplyTimeout, cmd)
}
