// The sub-packages each see the node through a small interface of their
// own (check.Host, membership.Host, leader.Host); these are the node's
// answers to them, so a sub-package never imports the node.

package cluster

import (
	"context"
	"log/slog"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/check"
	"github.com/dockethq/docket/cluster/membership"
	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// checkHost is the Node as the consistency checker sees it (check.Host).
// Its Propose is the node's own bounded one, which turns a rejection into
// an error, not the Service's.
type checkHost struct{ n *Node }

func (h checkHost) Propose(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	return h.n.propose(ctx, cmd)
}

func (h checkHost) EnabledLevel() uint32 { return h.n.EnabledLevel() }
func (h checkHost) Voters() []string     { return h.n.voterIDs() }
func (h checkHost) LeaveRaft()           { h.n.leaveRaft() }

// Term is Raft's current term, 0 while Raft is not running yet (the FSM
// replays before NewRaft returns).
func (h checkHost) Term() uint64 {
	if r := h.n.role.raft.Load(); r != nil {
		return r.CurrentTerm()
	}
	return 0
}

// PeerHash asks voter id for its hash at index over the peer pool.
func (h checkHost) PeerHash(ctx context.Context, id string, index uint64) string {
	p, _ := h.n.peers.Get(id)
	if p.GRPCAddr == "" {
		return ""
	}
	st, err := h.n.pool.Status(ctx, p.GRPCAddr, &pb.StatusRequest{CheckIndex: index})
	if err != nil || st.GetNodeId() != id {
		return ""
	}
	return st.GetCheckHash()
}

// checkConfig is the checker's part of the node's configuration.
func (c Config) checkConfig(log *slog.Logger) check.Config {
	return check.Config{ID: c.ID, DataDir: c.DataDir, Log: log, CheckInterval: c.CheckInterval,
		CheckTimeout: c.CheckTimeout, CheckRate: c.CheckRate, ScrubInterval: c.ScrubInterval}
}

// leaveRaft takes a diverged node out of the cluster's life: a leader first
// hands leadership over, then Raft shuts down, so this node neither leads
// nor votes again. Its stores stay open so Status can still explain why.
func (n *Node) leaveRaft() {
	if n.IsLeader() && n.voterCount() > 1 {
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
		err := membership.WaitFuture(ctx, n.raft.LeadershipTransfer())
		cancel()
		if err != nil {
			n.log.Warn("diverged leader: leadership transfer failed; shutting Raft down anyway", "err", err)
		} else {
			n.log.Info("diverged leader: leadership transferred")
		}
	}
	// Through shutdownRaft, so that a Shutdown of the node meanwhile waits
	// for this one instead of getting raft's no-wait answer to a second
	// call and closing the stores under a Raft still running.
	if err := n.shutdownRaft().Error(); err != nil {
		n.log.Error("diverged node: raft shutdown", "err", err)
	}
	n.log.Error("diverged node: Raft is shut down; waiting for repair")
}

// CheckErr is nil when this node may serve: nil, check.ErrAwaitingCheck after a
// restart until a consistency check passes on it, or an error wrapping
// check.ErrDiverged once a check found its keyspace different from the majority's.
func (n *Node) CheckErr() error { return n.check.Err() }

// CheckHash is this node's keyspace hash at a consistency check index,
// "" while it is being computed or when this node did not hash it.
func (n *Node) CheckHash(index uint64) string { return n.check.HashAt(index) }

// voterIDs lists the voters of the latest configuration.
func (n *Node) voterIDs() []string {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var ids []string
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			ids = append(ids, string(s.ID))
		}
	}
	return ids
}

// membershipHost is the Node as reconcile sees it (membership.Host).
type membershipHost struct{ n *Node }

func (h membershipHost) LatchedLevel() uint32       { return h.n.fsm.EnabledLevel() }
func (h membershipHost) Leaving() bool              { return h.n.leaving.Load() }
func (h membershipHost) MapRaftErr(err error) error { return h.n.mapRaftErr(err) }

// leaderHost is what the leader's loops see of the node: the Service's
// group commit and bootstrap, the node's FSM, clock and feature level.
type leaderHost struct {
	*service.Service
	*Node
}
