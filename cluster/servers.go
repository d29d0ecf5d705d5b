package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/gossip"
	"github.com/dockethq/docket/cluster/membership"
	"github.com/dockethq/docket/cluster/replica"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// bootstrapIfAlone bootstraps a single-server cluster at once. Multi-server
// bootstrap happens in discover, once enough peers are known.
func (n *Node) bootstrapIfAlone() error {
	if n.cfg.BootstrapExpect != 1 || n.hasState() {
		return nil
	}
	cfg := raft.Configuration{Servers: []raft.Server{{
		ID: raft.ServerID(n.cfg.ID), Address: raft.ServerAddress(n.cfg.RaftAddr), Suffrage: raft.Voter,
	}}}
	if err := n.raft.BootstrapCluster(cfg).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap: %w", err)
	}
	return nil
}

// hasState reports whether this node already belongs to a configuration.
func (n *Node) hasState() bool {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return false
	}
	return len(f.Configuration().Servers) > 0
}

func (n *Node) inConfiguration() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.cfg.ID {
			return true
		}
	}
	return false
}

// voterCount is the number of voters in the latest configuration.
func (n *Node) voterCount() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	c := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			c++
		}
	}
	return c
}

// Status describes this node and the cluster as it sees it. withHash adds
// the keyspace hash, which reads every key.
func (n *Node) Status() *pb.StatusResponse {
	st, _ := n.StatusWithHash(false) // without the hash it cannot fail
	return st
}

// StatusWithHash is Status, optionally with the keyspace hash.
func (n *Node) StatusWithHash(withHash bool) (*pb.StatusResponse, error) {
	leaderID, leaderGRPC := n.Leader()
	st := &pb.StatusResponse{
		NodeId:          n.cfg.ID,
		ClusterId:       n.fsm.ClusterID(),
		State:           n.raft.State().String(),
		LeaderId:        leaderID,
		LeaderGrpcAddr:  leaderGRPC,
		Term:            n.raft.CurrentTerm(),
		CommitIndex:     n.raft.CommitIndex(),
		AppliedIndex:    n.raft.AppliedIndex(),
		FsmAppliedIndex: n.fsm.AppliedIndex(),
		RaftAddr:        n.cfg.RaftAddr,
		GrpcAddr:        n.cfg.GRPCAddr,
		Consistency:     n.check.Status(),

		FeatureLevel:        n.fsm.MaxLevel(),
		EnabledFeatureLevel: n.fsm.EnabledLevel(),
	}
	members := map[string]gossip.Member{}
	if n.gossip != nil {
		for _, m := range n.gossip.Members() {
			members[m.ID] = m
		}
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		voters, alive := 0, 0
		for _, s := range f.Configuration().Servers {
			p, _ := n.peers.Get(string(s.ID))
			health, version := "unknown", ""
			if m, ok := members[string(s.ID)]; ok {
				health, version = m.Status.String(), m.Version
			}
			if string(s.ID) == n.cfg.ID {
				p.Level, health, version = n.fsm.MaxLevel(), "alive", Version
			}
			if s.Suffrage == raft.Voter {
				voters++
				if health == "alive" {
					alive++
				}
			}
			st.Servers = append(st.Servers, &pb.Server{
				FeatureLevel: p.Level,
				Version:      version,
				Health:       health,
				Id:           string(s.ID),
				RaftAddr:     string(s.Address),
				GrpcAddr:     p.GRPCAddr,
				Suffrage:     map[raft.ServerSuffrage]string{raft.Voter: "voter", raft.Nonvoter: "nonvoter", raft.Staging: "staging"}[s.Suffrage],
				Leader:       string(s.ID) == leaderID,
			})
		}
		st.FailureTolerance = int32(alive - (voters/2 + 1))
	}
	if withHash {
		h, err := n.fsm.Hash()
		if err != nil {
			return st, err
		}
		st.KeyspaceHash = h
	}
	return st, nil
}

// TransferLeadership hands leadership to toID, or to the most caught-up
// voter when toID is empty, and returns the new leader's id.
func (n *Node) TransferLeadership(ctx context.Context, toID string) (string, error) {
	if !n.IsLeader() {
		return "", n.notLeader()
	}
	var f raft.Future
	if toID == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		addr, ok := n.serverAddr(toID)
		if !ok {
			return "", fmt.Errorf("transfer to %s: %w", toID, ErrUnknownServer)
		}
		f = n.raft.LeadershipTransferToServer(raft.ServerID(toID), addr)
	}
	if err := membership.WaitFuture(ctx, f); err != nil {
		if isTransferTimeout(err) {
			return "", fmt.Errorf("transfer leadership to %s: %w", cmp.Or(toID, "the most caught-up server"), ErrTransferTimedOut)
		}
		return "", fmt.Errorf("transfer leadership: %w", n.mapRaftErr(err))
	}
	for {
		if id, _ := n.Leader(); id != "" && id != n.cfg.ID {
			return id, nil
		}
		if !replica.Sleep(ctx, 10*time.Millisecond) {
			return "", fmt.Errorf("transfer leadership: waiting for new leader: %w", ctx.Err())
		}
	}
}

func (n *Node) serverAddr(id string) (raft.ServerAddress, bool) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return "", false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return s.Address, true
		}
	}
	return "", false
}

// AddServer adds a server to the configuration, as a voter or non-voter.
// Leader only.
func (n *Node) AddServer(ctx context.Context, id, raftAddr, grpcAddr string, nonvoter bool) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	if n.peers.Put(membership.Peer{ID: id, RaftAddr: raftAddr, GRPCAddr: grpcAddr}) {
		if err := n.peers.Save(); err != nil {
			n.log.Warn("saving peers failed", "err", err)
		}
	}
	var f raft.IndexFuture
	if nonvoter {
		f = n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, 0)
	} else {
		f = n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, 0)
	}
	if err := membership.WaitFuture(ctx, f); err != nil {
		return fmt.Errorf("add server %s: %w", id, n.mapRaftErr(err))
	}
	n.log.Info("server added", "id", id, "raft", raftAddr, "nonvoter", nonvoter)
	return nil
}

// RemoveServer removes a server from the configuration. Leader only.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("remove server %s: %w", id, n.mapRaftErr(err))
	}
	if !slices.ContainsFunc(f.Configuration().Servers, func(s raft.Server) bool { return string(s.ID) == id }) {
		return fmt.Errorf("remove server %s: %w", id, ErrUnknownServer)
	}
	n.removed.Add(id, time.Now())
	if err := membership.WaitFuture(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, 0)); err != nil {
		return fmt.Errorf("remove server %s: %w", id, n.mapRaftErr(err))
	}
	n.log.Info("server removed", "id", id)
	return nil
}

// reconcileLoop runs membership reconcile for one term of leadership.
func (n *Node) reconcileLoop(ctx context.Context) {
	c := n.cfg
	cfg := membership.ReconcileConfig{Self: c.ID, Log: n.log, Interval: c.ReconcileInterval, ApplyTimeout: c.ApplyTimeout,
		MaxTrailingLogs: c.MaxTrailingLogs, Rules: membership.Rules{DeadServerTimeout: c.DeadServerTimeout,
			Stabilization: c.ServerStabilizationTime, MinQuorum: c.MinQuorum, RemovedHold: membership.RemovedHold}}
	membership.NewReconciler(cfg, n.raft, membershipHost{n}, n.gossip, n.pool, n.peers, &n.removed).Run(ctx, n.reconcileKick)
}

// isTransferTimeout recognises hashicorp/raft's two answers to a
// transfer whose target did not take over: the TimeoutNow RPC failed (the
// target is down), or it was sent and the target never won (it is cut
// off or behind). Raft has no sentinel for either, only these texts
// (raft.go, leadershipTransfer), so a raft upgrade that rewords them makes
// the transfer answer Internal again, which
// Test_TransferToADeadNodeSaysSo catches.
func isTransferTimeout(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return msg == "leadership transfer timeout" || strings.HasPrefix(msg, "failed to make TimeoutNow RPC")
}
