package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dockethq/docket/cluster/replica"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// ErrLastVoter means Leave was asked of the only voter: no one could take
// over, so it stays.
var ErrLastVoter = errors.New("the only voter cannot leave its cluster")

// leaveBroadcast bounds how long Leave waits for the leave to be gossiped.
const leaveBroadcast = 3 * time.Second

// leavePeerPoll is how often a leaving server asks its peers whether the
// leader removed it.
const leavePeerPoll = 500 * time.Millisecond

// Leave takes this server out of the cluster for good: it hands
// leadership over if it leads, announces the leave on gossip (the leader's
// reconcile then removes it from the configuration at once, without the
// dead-server timeout), and waits until it sees itself removed or ctx
// ends. The node keeps running; the caller shuts it down (Left tells an
// agent to). A plain Shutdown is not a leave: the server stays in the
// configuration, so a rolling restart never shrinks the cluster.
func (n *Node) Leave(ctx context.Context) error {
	if n.leaving.Load() {
		select {
		case <-n.left:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("leave: %w", ctx.Err())
		}
	}
	if n.IsLeader() {
		if n.voterCount() <= 1 {
			return ErrLastVoter
		}
		if _, err := n.TransferLeadership(ctx, ""); err != nil {
			return fmt.Errorf("leave: %w", err)
		}
	}
	if !n.leaving.CompareAndSwap(false, true) {
		return n.Leave(ctx) // a concurrent Leave got here first
	}
	n.log.Info("leaving the cluster")
	if err := n.gossip.Leave(leaveBroadcast); err != nil {
		n.log.Warn("gossip leave", "err", err)
	}
	// The leader stops replicating to a server as soon as it appends the
	// configuration without it, so the server may never receive that
	// entry: its own configuration would list it for ever, and it would
	// campaign in vain. Also ask the peers: a peer that knows a leader and
	// no longer lists this server has seen the removal.
	for askAt := time.Now(); n.inConfiguration(); {
		if time.Now().After(askAt) {
			if by := n.removedPerPeers(ctx); by != "" {
				n.log.Info("removal seen by a peer, not in this node's log", "peer", by)
				break
			}
			askAt = time.Now().Add(leavePeerPoll)
		}
		if !replica.Sleep(ctx, 20*time.Millisecond) {
			return fmt.Errorf("leave: waiting to be removed from the configuration: %w", ctx.Err())
		}
	}
	n.log.Info("left the cluster")
	close(n.left)
	return nil
}

// Left is closed once Leave has taken this server out of the
// configuration; an agent stops when it is.
func (n *Node) Left() <-chan struct{} { return n.left }

// removedPerPeers asks each peer for its Status and returns the id of the
// first one that knows a leader and does not list this server, or "".
func (n *Node) removedPerPeers(ctx context.Context) string {
	for _, p := range n.peers.All() {
		if p.ID == n.cfg.ID || p.GRPCAddr == "" {
			continue
		}
		st, err := n.pool.Status(ctx, p.GRPCAddr, &pb.StatusRequest{})
		if err != nil || st.GetLeaderId() == "" || st.GetLeaderId() == n.cfg.ID {
			continue
		}
		listed := false
		for _, s := range st.GetServers() {
			listed = listed || s.GetId() == n.cfg.ID
		}
		if !listed {
			return p.ID
		}
	}
	return ""
}
