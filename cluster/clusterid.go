package cluster

import (
	"context"
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"

	"github.com/dockethq/docket/cluster/peer"
	"github.com/dockethq/docket/fsm"
)

// nameClusterOnce proposes the cluster's id when the cluster has none and
// every server applies SetClusterID. Apply keeps the first id, so two
// leaders that both propose one (a lost answer, a quick re-election)
// leave the cluster with one name.
func (n *Node) nameClusterOnce(ctx context.Context) error {
	if n.fsm.ClusterID() != "" || n.EnabledLevel() < fsm.LevelIdentity {
		return nil
	}
	id, err := peer.NewClusterID()
	if err != nil {
		return err
	}
	_, err = n.propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_CLUSTER_ID,
		Body: &pb.Command_SetClusterId{SetClusterId: &pb.SetClusterIDCmd{Id: id}}})
	if err != nil {
		return fmt.Errorf("name the cluster: %w", err)
	}
	n.log.Info("cluster named", "cluster", n.fsm.ClusterID())
	return nil
}

// ClusterID is the cluster's id, "" until the cluster named itself or
// while this node has not caught up with the entry that did.
func (n *Node) ClusterID() string { return n.fsm.ClusterID() }

// CheckPeerCluster refuses a call from a node that named another cluster
// (pb.MetadataCluster); calls without the key (clients, older builds) pass.
func (n *Node) CheckPeerCluster(peer, theirs string) error {
	return n.ident.Check("grpc", peer, theirs)
}

// Identity is the node's cluster id and the check that refuses peers of
// another cluster.
func (n *Node) Identity() *peer.Identity { return n.ident }
