package cluster

import (
	"context"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/check"
	"github.com/dockethq/docket/cluster/gossip"
	"github.com/dockethq/docket/cluster/leader"
	"github.com/dockethq/docket/cluster/peer"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Internals are a running node's parts, for the tests of cluster's
// sub-packages (through cluster/internal/nodetest), which must reach the
// part they test inside a real node. The API layer never needs them: what
// it may do is a method of Node or of its Service.
type Internals struct {
	Config  Config // as the node runs it: RaftAddr is the bound address
	Raft    *raft.Raft
	Logs    raft.LogStore // the LogCache over the checksummed store
	Checker *check.Checker
	Gossip  *gossip.Gossip
	Ident   *peer.Identity
	Loops   *leader.Loops // the leader's housekeeping over this node, to run one step
	// Propose runs a housekeeping command as the leader's loops do: a
	// bounded wait, and a whole-command rejection as an error.
	Propose func(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error)
}

// Internals returns the node's parts; see the type.
func (n *Node) Internals() Internals {
	return Internals{Config: n.cfg, Raft: n.raft, Logs: n.logs, Checker: n.check, Gossip: n.gossip,
		Ident: n.ident, Loops: n.loops(), Propose: n.propose}
}
