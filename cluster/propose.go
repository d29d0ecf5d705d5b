package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/health"
	"github.com/dockethq/docket/cluster/membership"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// ErrUnknownServer means a server id is not in the Raft configuration.
var ErrUnknownServer = errors.New("unknown server")

// ErrTransferTimedOut means the server a leadership transfer named did
// not take over within an election timeout: it is down, cut off or too
// far behind. This node is still the leader; retry once the target is
// healthy, or transfer to another server.
var ErrTransferTimedOut = errors.New("the target did not take leadership in time (down, cut off or behind); this node still leads")

func (n *Node) notLeader() error {
	id, addr := n.Leader()
	return &replica.NotLeaderError{LeaderID: id, LeaderGRPC: addr}
}

// Apply stamps cmd with the leader's time and the tenant limits,
// replicates it as one Raft entry and returns the FSM's answer. It returns
// once the entry is committed on a quorum (each log fsync'd) and applied
// here. Many concurrent applies share one log append and fsync
// (BatchApplyCh). It does not validate: the Service checked the request
// where it arrived, and the FSM judges every command again in apply, where
// a bad value is a rejected result like any other.
//
// Errors: *NotLeaderError (nothing proposed), ErrLeadershipLost and context
// errors (outcome unknown; ErrLeadershipLost also wraps ErrLogWrite when
// this leader could not append), ErrShutdown.
func (n *Node) Apply(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	if n.raft.State() != raft.Leader {
		return nil, n.notLeader()
	}
	cmd.Now = n.clock.Now().UnixNano()
	fsm.StampTenantLimits(cmd, n.cfg.TenantMaxTasks, n.cfg.TenantMaxBytes)
	data, err := fsm.EncodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	// The checksum travels with the entry (Extensions), so every store and
	// every apply, here and on each follower, can check the bytes it got.
	f := n.raft.ApplyLog(raft.Log{Data: data, Extensions: fsm.CommandExtension(data, fsm.CommandLevel(cmd))}, timeout)
	// The future always resolves (at the latest when Raft shuts down), so
	// this goroutine ends; the caller may stop waiting earlier.
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			return nil, n.mapRaftErr(err)
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("propose %v: %w", cmd.GetType(), ctx.Err())
	}
	if err, ok := f.Response().(error); ok {
		return nil, fmt.Errorf("propose %v: %w", cmd.GetType(), err)
	}
	res, ok := f.Response().(*pb.CommandResult)
	if !ok {
		return nil, fmt.Errorf("propose %v: FSM answered %T", cmd.GetType(), f.Response())
	}
	return res, nil
}

func (n *Node) mapRaftErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return n.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %v", replica.ErrLeadershipLost, err)
	case errors.Is(err, health.ErrLogWrite):
		// The leader could not append and stepped down (raft's
		// dispatchLogs). The entry was never sent to a follower, but a
		// failed BoltDB commit may have reached the disk anyway, and a
		// node that restarts with it could still lead and commit it: the
		// outcome is unknown, not "nothing proposed" (DESIGN.md).
		return fmt.Errorf("%w: %w", replica.ErrLeadershipLost, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return replica.ErrShutdown
	case errors.Is(err, raft.ErrEnqueueTimeout):
		// Not enqueued within the caller's time: nothing was proposed.
		return fmt.Errorf("propose: %w", context.DeadlineExceeded)
	}
	return fmt.Errorf("propose: %w", err)
}

// LeaderCaughtUp reports whether the leader's first Barrier of its term returned,
// so its replica holds every entry the leaders before it committed.
func (n *Node) LeaderCaughtUp() bool { return n.readyTerm.Load() == n.raft.CurrentTerm() }

// ReadBarrier makes a following local read linearizable: it confirms with
// a quorum that this node still leads, then waits until the local FSM has
// applied everything committed before that moment. On a follower it returns
// *NotLeaderError.
func (n *Node) ReadBarrier(ctx context.Context) error {
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	// Right after an election the commit index can lag entries an earlier
	// leader committed, until this leader commits one of its own term. The
	// leader loop's Barrier marks that point; a read that comes first runs
	// its own Barrier.
	if term := n.raft.CurrentTerm(); n.readyTerm.Load() != term {
		if err := membership.WaitFuture(ctx, n.raft.Barrier(n.cfg.ApplyTimeout)); err != nil {
			return fmt.Errorf("read barrier: %w", n.mapRaftErr(err))
		}
		n.readyTerm.Store(term)
	}
	commit := n.raft.CommitIndex()
	f := n.raft.VerifyLeader()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			return n.mapRaftErr(err)
		}
	case <-ctx.Done():
		return fmt.Errorf("read barrier: %w", ctx.Err())
	}
	// The leader applies right behind commit, so this is usually already
	// true; the wait covers a leader that just won and is replaying.
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for !n.appliedThrough(commit) {
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("read barrier: waiting for apply %d: %w", commit, ctx.Err())
		}
	}
	return nil
}

// maxGapScan bounds how many log entries appliedThrough inspects; a longer
// gap is simply waited out.
const maxGapScan = 64

// appliedThrough reports whether the FSM has applied every entry up to
// index. Raft hands the FSM only command and configuration entries, so its
// applied index stops short of a trailing no-op or barrier; such a gap
// counts as applied.
func (n *Node) appliedThrough(index uint64) bool {
	a := n.fsm.AppliedIndex()
	if a >= index {
		return true
	}
	if index-a > maxGapScan {
		return false
	}
	var l raft.Log
	for i := a + 1; i <= index; i++ {
		if err := n.logs.GetLog(i, &l); err != nil {
			return false // compacted or unreadable: wait for the FSM instead
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return false
		}
	}
	return true
}
