package cluster

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Batch sizes of the leader's housekeeping commands.
const (
	reapBatch    = 1000
	promoteBatch = 1000
	purgeBatch   = 1000
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

// leaderLoop catches up with a Barrier, waits out
// the reap grace period, then runs the reaper, the delayed mover, the
// retention purge and the consistency checks until ctx ends.
func (n *Node) leaderLoop(ctx context.Context) {
	n.log.Info("leader loops starting")
	// Everything committed by earlier leaders is applied locally once the
	// barrier returns, so scans below see the whole history.
	for {
		term := n.raft.CurrentTerm()
		// A Barrier's future carries no shutdown channel: if Raft stops
		// before the FSM applies it, it never resolves. Waiting on ctx too
		// lets Shutdown end this loop (a CI run hung here for 20 minutes).
		err := waitFuture(ctx, n.raft.Barrier(n.cfg.ApplyTimeout))
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			n.readyTerm.Store(term)
			break
		}
		n.log.Warn("leader barrier failed", "err", err)
		if !sleepCtx(ctx, n.cfg.ReapInterval) {
			return
		}
	}
	reapAfter := time.Now().Add(n.cfg.ReapGrace)
	if err := n.latchOnce(ctx); err != nil && ctx.Err() == nil {
		n.log.Warn("feature level latch failed", "err", err)
	}
	if err := n.nameClusterOnce(ctx); err != nil && ctx.Err() == nil {
		n.log.Warn("naming the cluster failed", "err", err)
	}
	wgBoot := sync.WaitGroup{}
	wgBoot.Add(1)
	go func() {
		defer wgBoot.Done()
		n.bootstrapToken(ctx)
	}()
	defer wgBoot.Wait()

	var wg sync.WaitGroup
	run := func(name string, every time.Duration, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if err := fn(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, replica.ErrNotLeader) && !errors.Is(err, replica.ErrShutdown) {
					n.log.Warn("leader task failed", "task", name, "err", err)
				}
			}
		}()
	}
	run("reap", n.cfg.ReapInterval, func(ctx context.Context) error {
		if time.Now().Before(reapAfter) {
			return nil
		}
		return n.reapOnce(ctx)
	})
	run("timeout", n.cfg.ReapInterval, func(ctx context.Context) error {
		if time.Now().Before(reapAfter) {
			return nil // a new leader's clock may run ahead of the last one's
		}
		return n.timeOutOnce(ctx)
	})
	run("promote", n.cfg.PromoteInterval, n.promoteOnce)
	run("latch", service.LatchInterval, func(ctx context.Context) error {
		if err := n.latchOnce(ctx); err != nil {
			return err
		}
		return n.nameClusterOnce(ctx) // once every server applies it
	})
	run("purge", n.cfg.PurgeInterval, n.purgeOnce)
	run("schedule", n.cfg.ScheduleInterval, n.scheduleOnce)
	wg.Add(2)
	go func() {
		defer wg.Done()
		n.reconcileLoop(ctx)
	}()
	go func() {
		defer wg.Done()
		n.checkLoop(ctx)
	}()
	wg.Wait()
}

// bootstrapToken creates the bootstrap token when this node has a secret
// and the cluster never created one; otherwise it says why it ignores it.
// Tokens need their feature level: until the cluster latched it (every
// server announced it), it waits.
func (n *Node) bootstrapToken(ctx context.Context) {
	if n.cfg.BootstrapSecret == "" {
		return
	}
	var err error
	for {
		err = n.Bootstrap(ctx, n.cfg.BootstrapSecret)
		if !errors.Is(err, service.ErrFeatureDisabled) {
			break
		}
		if !sleepCtx(ctx, service.LatchInterval) {
			return
		}
	}
	switch {
	case err == nil:
		n.log.Info("bootstrap token created")
	case errors.Is(err, service.ErrBootstrapped):
		n.log.Info("bootstrap token ignored: this cluster created its bootstrap token before")
	case ctx.Err() == nil:
		n.log.Error("bootstrap token not created", "err", err)
	}
}

// reapOnce proposes Reap for the leases that expired by the leader's now.
// The FSM re-checks each fence and expiry, so a heartbeat that lands
// between this scan and the apply wins.
func (n *Node) reapOnce(ctx context.Context) error {
	items, err := n.fsm.ExpiredLeases(n.clock.Now().UnixNano(), reapBatch)
	if err != nil || len(items) == 0 {
		return err
	}
	res, err := n.propose(ctx, &pb.Command{
		Type: pb.CommandType_COMMAND_TYPE_REAP,
		Body: &pb.Command_Reap{Reap: &pb.ReapCmd{Items: items}},
	})
	if err != nil {
		return err
	}
	reaped := 0
	for _, it := range res.GetItems() {
		if it.GetCode() == pb.Code_CODE_OK {
			reaped++
		}
	}
	n.log.Info("reaped expired leases", "seen", len(items), "requeued", reaped)
	return nil
}

func (n *Node) promoteOnce(ctx context.Context) error {
	delayed, _, err := n.fsm.HasDue(n.clock.Now().UnixNano())
	if err != nil || !delayed {
		return err
	}
	_, err = n.propose(ctx, &pb.Command{
		Type: pb.CommandType_COMMAND_TYPE_PROMOTE_DELAYED,
		Body: &pb.Command_PromoteDelayed{PromoteDelayed: &pb.PromoteDelayedCmd{Limit: promoteBatch}},
	})
	return err
}

func (n *Node) purgeOnce(ctx context.Context) error {
	_, expired, err := n.fsm.HasDue(n.clock.Now().UnixNano())
	if err != nil || !expired {
		return err
	}
	_, err = n.propose(ctx, &pb.Command{
		Type: pb.CommandType_COMMAND_TYPE_PURGE,
		Body: &pb.Command_Purge{Purge: &pb.PurgeCmd{Limit: purgeBatch}},
	})
	return err
}

// propose runs a housekeeping command with a bounded wait and turns a
// whole-command rejection into an error.
func (n *Node) propose(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
	defer cancel()
	res, err := n.Propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return res, fsm.ResultError(res)
}

// sleepCtx waits d or until ctx ends; false means ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
