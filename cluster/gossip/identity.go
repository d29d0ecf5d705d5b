package gossip

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// filter keeps members of another cluster out of the pool: memberlist
// asks it before it adds a member it heard is alive (memberlist's
// AliveDelegate) and before it merges a joining pool's members
// (MergeDelegate). Two clusters that share a gossip key and can reach each
// other (a company CA and key reused for staging and production) would
// otherwise see one pool, and each leader would try to make the other's
// servers its voters.
type filter Gossip

// NotifyAlive refuses a member that names another cluster.
func (f *filter) NotifyAlive(n *memberlist.Node) error { return (*Gossip)(f).admit(n) }

// NotifyMerge refuses a whole join when any member names another cluster.
func (f *filter) NotifyMerge(peers []*memberlist.Node) error {
	for _, n := range peers {
		if err := (*Gossip)(f).admit(n); err != nil {
			return err
		}
	}
	return nil
}

// admit passes every member unless both it and this node know their
// cluster ids and they differ. A member whose meta does not parse passes
// here; record keeps it without addresses.
func (g *Gossip) admit(n *memberlist.Node) error {
	var meta Meta
	if json.Unmarshal(n.Meta, &meta) != nil || meta.Cluster == "" {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	mine := g.meta.Cluster
	if n.Name == g.meta.ID || mine == "" || meta.Cluster == mine {
		return nil
	}
	if g.refused == nil {
		g.refused = map[string]string{}
	}
	if g.refused[n.Name] != meta.Cluster { // memberlist asks on every alive message
		g.refused[n.Name] = meta.Cluster
		g.log.Error("refusing a gossip member of another cluster", "member", n.Name, "addr", n.Address(),
			"this_cluster", mine, "member_cluster", meta.Cluster)
	}
	return fmt.Errorf("member %s is in cluster %s, this node in cluster %s", n.Name, meta.Cluster, mine)
}
