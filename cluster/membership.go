package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Discovery intervals: fast until the node is part of a configuration,
// then slow, since it only refreshes gRPC addresses for leader hints.
const (
	discoverFast = 200 * time.Millisecond
	discoverSlow = 2 * time.Second
	statusRPC    = time.Second
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

// discover polls the Join addresses and every known peer for their
// identity and membership. This is the seam that memberlist gossip replaces:
// it feeds the peer book (leader hints), multi-server bootstrap and join.
func (n *Node) discover() {
	defer n.wg.Done()
	conns := map[string]*grpc.ClientConn{}
	defer func() {
		for _, c := range conns {
			_ = c.Close() // best effort at shutdown; nothing to do with the error
		}
	}()
	for {
		member := n.inConfiguration()
		wait := discoverSlow
		if !member {
			wait = discoverFast
		}
		if !sleepCtx(n.ctx, wait) {
			return
		}
		statuses := n.pollPeers(conns)
		changed := false
		for _, st := range statuses {
			if st.GetConsistency().GetStatus() == checkAwaiting && n.IsLeader() {
				n.check.poke() // a restarted voter serves nothing until a check passes on it
			}
			changed = n.peers.put(Peer{ID: st.GetNodeId(), RaftAddr: st.GetRaftAddr(), GRPCAddr: st.GetGrpcAddr(), Level: st.GetFeatureLevel()}) || changed
			for _, s := range st.GetServers() {
				changed = n.peers.put(Peer{ID: s.GetId(), RaftAddr: s.GetRaftAddr(), GRPCAddr: s.GetGrpcAddr()}) || changed
			}
		}
		if changed {
			if err := n.peers.save(); err != nil {
				n.log.Warn("saving peers failed", "err", err)
			}
		}
		if member {
			continue
		}
		if err := n.tryJoin(statuses); err != nil {
			n.log.Debug("not in a cluster yet", "err", err)
		}
	}
}

// pollPeers asks every known gRPC address (Join seeds and discovered
// peers, not itself) for its Status.
func (n *Node) pollPeers(conns map[string]*grpc.ClientConn) []*pb.StatusResponse {
	addrs := map[string]bool{}
	for _, a := range n.cfg.Join {
		addrs[a] = true
	}
	for _, p := range n.peers.all() {
		if p.GRPCAddr != "" {
			addrs[p.GRPCAddr] = true
		}
	}
	delete(addrs, n.cfg.GRPCAddr)
	sorted := make([]string, 0, len(addrs))
	for a := range addrs {
		sorted = append(sorted, a)
	}
	sort.Strings(sorted)
	var out []*pb.StatusResponse
	for _, a := range sorted {
		c, ok := conns[a]
		if !ok {
			var err error
			if c, err = grpc.NewClient(a, n.peerDialCreds()); err != nil {
				n.log.Warn("bad peer address", "addr", a, "err", err)
				continue
			}
			conns[a] = c
		}
		ctx, cancel := context.WithTimeout(n.ctx, statusRPC)
		st, err := pb.NewClusterClient(c).Status(ctx, &pb.StatusRequest{})
		cancel()
		if err != nil {
			continue // a peer that is down is simply not discovered this round
		}
		out = append(out, st)
	}
	return out
}

// tryJoin gets a node that is in no configuration into one: by a joint
// bootstrap once BootstrapExpect servers are known and none has a leader,
// or by asking the leader to add it.
func (n *Node) tryJoin(statuses []*pb.StatusResponse) error {
	for _, st := range statuses {
		if addr := st.GetLeaderGrpcAddr(); addr != "" {
			return n.askToJoin(addr)
		}
	}
	if n.cfg.BootstrapExpect <= 1 {
		return errors.New("no leader found through join addresses")
	}
	var servers []raft.Server
	for _, p := range n.peers.all() {
		if p.RaftAddr != "" {
			servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr), Suffrage: raft.Voter})
		}
	}
	if len(servers) < n.cfg.BootstrapExpect {
		return fmt.Errorf("know %d of %d expected servers", len(servers), n.cfg.BootstrapExpect)
	}
	// Every expected server computes the same sorted list, which Raft
	// accepts as one bootstrap.
	servers = servers[:n.cfg.BootstrapExpect]
	err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap: %w", err)
	}
	n.log.Info("bootstrapped cluster", "servers", len(servers))
	return nil
}

func (n *Node) askToJoin(leaderAddr string) error {
	c, err := grpc.NewClient(leaderAddr, n.peerDialCreds())
	if err != nil {
		return fmt.Errorf("join via %s: %w", leaderAddr, err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
	defer cancel()
	if n.cfg.JoinToken != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, pb.MetadataAuthorization, "Bearer "+n.cfg.JoinToken)
	}
	_, err = pb.NewClusterClient(c).AddServer(ctx, &pb.AddServerRequest{Id: n.cfg.ID, RaftAddr: n.cfg.RaftAddr, GrpcAddr: n.cfg.GRPCAddr})
	if err != nil {
		return fmt.Errorf("join via %s: %w", leaderAddr, err)
	}
	n.log.Info("asked leader to add this server", "leader", leaderAddr)
	return nil
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
		State:           n.raft.State().String(),
		LeaderId:        leaderID,
		LeaderGrpcAddr:  leaderGRPC,
		Term:            n.raft.CurrentTerm(),
		CommitIndex:     n.raft.CommitIndex(),
		AppliedIndex:    n.raft.AppliedIndex(),
		FsmAppliedIndex: n.fsm.AppliedIndex(),
		RaftAddr:        n.cfg.RaftAddr,
		GrpcAddr:        n.cfg.GRPCAddr,
		Consistency:     n.check.status(),

		FeatureLevel:        n.fsm.MaxLevel(),
		EnabledFeatureLevel: n.fsm.EnabledLevel(),
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			p, _ := n.peers.get(string(s.ID))
			if string(s.ID) == n.cfg.ID {
				p.Level = n.fsm.MaxLevel()
			}
			st.Servers = append(st.Servers, &pb.Server{
				FeatureLevel: p.Level,
				Id:           string(s.ID),
				RaftAddr:     string(s.Address),
				GrpcAddr:     p.GRPCAddr,
				Suffrage:     map[raft.ServerSuffrage]string{raft.Voter: "voter", raft.Nonvoter: "nonvoter", raft.Staging: "staging"}[s.Suffrage],
				Leader:       string(s.ID) == leaderID,
			})
		}
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
	if err := waitFuture(ctx, f); err != nil {
		return "", fmt.Errorf("transfer leadership: %w", n.mapRaftErr(err))
	}
	for {
		if id, _ := n.Leader(); id != "" && id != n.cfg.ID {
			return id, nil
		}
		if !sleepCtx(ctx, 10*time.Millisecond) {
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
	if n.peers.put(Peer{ID: id, RaftAddr: raftAddr, GRPCAddr: grpcAddr}) {
		if err := n.peers.save(); err != nil {
			n.log.Warn("saving peers failed", "err", err)
		}
	}
	var f raft.IndexFuture
	if nonvoter {
		f = n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, 0)
	} else {
		f = n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, 0)
	}
	if err := waitFuture(ctx, f); err != nil {
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
	if err := waitFuture(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, 0)); err != nil {
		return fmt.Errorf("remove server %s: %w", id, n.mapRaftErr(err))
	}
	n.log.Info("server removed", "id", id)
	return nil
}

// waitFuture waits for a Raft future or the context.
func waitFuture(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
