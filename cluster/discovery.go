package cluster

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/check"
	"github.com/dockethq/docket/cluster/gossip"
	"github.com/dockethq/docket/cluster/membership"
	"github.com/dockethq/docket/cluster/replica"
)

// Version is the build's version, gossiped to the other servers. Release
// builds set it with -ldflags "-X github.com/dockethq/docket/cluster.Version=...".
var Version = "dev"

// Rejoin pacing: a node alone in the pool retries its seeds often; a node
// in a pool retries the servers of its configuration that gossip lost
// (a healed partition, a restarted server) now and then, since each dead
// address costs a TCP timeout.
const (
	rejoinAlone = 500 * time.Millisecond
	rejoinLost  = 5 * time.Second
)

// gossipAddr is where gossip binds: Config.GossipAddr, or RaftAddr's host
// with a free port.
func gossipAddr(cfg Config) (string, error) {
	if cfg.GossipAddr != "" {
		return cfg.GossipAddr, nil
	}
	host, _, err := net.SplitHostPort(cfg.RaftAddr)
	if err != nil {
		return "", fmt.Errorf("raft address %q: %w", cfg.RaftAddr, err)
	}
	return net.JoinHostPort(host, "0"), nil
}

// startGossip joins this node to the gossip pool (alone until joinLoop
// finds a seed).
func (n *Node) startGossip() error {
	addr, err := gossipAddr(n.cfg)
	if err != nil {
		return err
	}
	n.gossip, err = gossip.New(gossip.Config{
		BindAddr: addr,
		Meta: gossip.Meta{ID: n.cfg.ID, RaftAddr: n.cfg.RaftAddr, GRPCAddr: n.cfg.GRPCAddr, Version: Version,
			Features: n.fsm.MaxLevel(), HasState: n.hasState(), Cluster: n.fsm.ClusterID()},
		Keys:     n.cfg.GossipKeys,
		Local:    n.cfg.GossipLocal,
		OnChange: func() { wake(n.gossipChanged) },
		Logger:   n.log,
	})
	if err != nil {
		return err
	}
	n.campaign.pool.Store(n.gossip)
	if !n.gossip.Encrypted() {
		n.log.Warn("gossip is plain: any host that reaches the gossip port can join (set a gossip key)", "gossip", n.gossip.Addr())
	}
	n.peers.Put(membership.Peer{ID: n.cfg.ID, RaftAddr: n.cfg.RaftAddr, GRPCAddr: n.cfg.GRPCAddr, GossipAddr: n.gossip.Addr(), Level: n.fsm.MaxLevel()})
	return nil
}

// GossipAddr is the gossip address this node advertises (with the bound
// port), what other servers give as --join.
func (n *Node) GossipAddr() string { return n.gossip.Addr() }

// SetGossipKeys rotates the gossip keyring (primary first); see
// cluster/gossip for the procedure.
func (n *Node) SetGossipKeys(keys [][]byte) error { return n.gossip.SetKeys(keys) }

// wake wakes whoever reads ch, without blocking: one pending wake-up is
// enough, since the reader looks at the whole state.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// discover follows the gossip pool: it feeds the peer book (leader hints,
// gRPC addresses), announces this node's state, bootstraps the first
// configuration from gossip members, and wakes the leader's reconcile.
func (n *Node) discover() {
	defer n.wg.Done()
	t := time.NewTicker(discoverTick)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.gossipChanged:
		case <-t.C:
		}
		members := n.gossip.Members()
		n.syncPeers(members)
		n.announce()
		if !n.hasState() {
			if err := n.tryBootstrap(members); err != nil {
				n.log.Debug("not in a cluster yet", "err", err)
			}
		}
		if n.IsLeader() {
			for _, m := range members {
				if m.Status == gossip.StatusAlive && m.Unchecked {
					n.check.Poke() // a restarted voter serves nothing until a check passes on it
					break
				}
			}
			wake(n.reconcileKick)
		}
	}
}

// discoverTick bounds how stale the announced state (HasState, Unchecked)
// and the peer book may be when gossip is quiet.
const discoverTick = time.Second

// syncPeers records every gossiping server in the peer book, saved when
// anything changed.
func (n *Node) syncPeers(members []gossip.Member) {
	changed := false
	for _, m := range members {
		if m.RaftAddr == "" {
			continue
		}
		changed = n.peers.Put(membership.Peer{ID: m.ID, RaftAddr: m.RaftAddr, GRPCAddr: m.GRPCAddr, GossipAddr: m.Addr,
			Level: m.Features}) || changed
	}
	if changed {
		if err := n.peers.Save(); err != nil {
			n.log.Warn("saving peers failed", "err", err)
		}
	}
}

// announce gossips what changed in this node's own state.
func (n *Node) announce() {
	if n.leaving.Load() {
		return // an update now would announce this node alive again
	}
	has := n.hasState()
	unchecked := n.check.Status().GetStatus() == check.StateAwaiting
	cluster := n.fsm.ClusterID()
	if err := n.gossip.SetMeta(func(m *gossip.Meta) { m.HasState, m.Unchecked, m.Cluster = has, unchecked, cluster }); err != nil {
		n.log.Debug("gossip announce", "err", err)
	}
}

// tryBootstrap forms the first configuration once BootstrapExpect servers
// gossip and none of them holds a configuration yet. Every one of them
// computes the same list (the first BootstrapExpect alive servers by id),
// which Raft accepts as one bootstrap. A server that sees a member with a
// configuration waits to be added by that cluster's leader instead.
func (n *Node) tryBootstrap(members []gossip.Member) error {
	if n.cfg.BootstrapExpect <= 1 {
		return errors.New("waiting for a leader to add this server")
	}
	var servers []raft.Server
	for _, m := range members {
		if m.Status != gossip.StatusAlive || m.RaftAddr == "" {
			continue
		}
		if m.HasState && m.ID != n.cfg.ID {
			return fmt.Errorf("%s already holds a configuration: waiting to be added", m.ID)
		}
		servers = append(servers, raft.Server{ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr), Suffrage: raft.Voter})
	}
	if len(servers) < n.cfg.BootstrapExpect {
		return fmt.Errorf("know %d of %d expected servers", len(servers), n.cfg.BootstrapExpect)
	}
	sort.Slice(servers, func(i, j int) bool { return servers[i].ID < servers[j].ID })
	servers = servers[:n.cfg.BootstrapExpect]
	mine := false
	for _, s := range servers {
		mine = mine || string(s.ID) == n.cfg.ID
	}
	if !mine {
		return errors.New("not among the first expected servers: waiting to be added")
	}
	err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap: %w", err)
	}
	n.log.Info("bootstrapped cluster", "servers", len(servers))
	n.announce()
	return nil
}

// joinLoop gets this node into the gossip pool and back into it: while
// alone it retries the Join seeds and the peer book's gossip addresses;
// in a pool it retries the configuration's servers that gossip does not
// show alive, so a healed partition merges (memberlist stops probing the
// dead after a while).
func (n *Node) joinLoop() {
	defer n.wg.Done()
	wait := time.Duration(0)
	for {
		if !replica.Sleep(n.ctx, wait) {
			return
		}
		if n.leaving.Load() {
			return
		}
		alone := n.gossip.Alive() <= 1
		wait = rejoinLost
		if alone {
			wait = rejoinAlone
		}
		addrs := n.rejoinAddrs(alone)
		if len(addrs) == 0 {
			continue
		}
		if k, err := n.gossip.Join(addrs); err != nil {
			n.log.Debug("gossip join", "addrs", addrs, "err", err)
		} else if alone {
			n.log.Info("joined the gossip pool", "answered", k)
		}
	}
}

// rejoinAddrs lists the gossip addresses worth contacting.
func (n *Node) rejoinAddrs(alone bool) []string {
	alive := map[string]bool{}
	for _, m := range n.gossip.Members() {
		alive[m.ID] = m.Status == gossip.StatusAlive
	}
	set := map[string]bool{}
	if alone {
		for _, a := range n.cfg.Join {
			set[a] = true
		}
	}
	inCfg := map[string]bool{}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			inCfg[string(s.ID)] = true
		}
	}
	for _, p := range n.peers.All() {
		if p.ID != n.cfg.ID && p.GossipAddr != "" && !alive[p.ID] && (alone || inCfg[p.ID]) {
			set[p.GossipAddr] = true
		}
	}
	delete(set, n.gossip.Addr())
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}
