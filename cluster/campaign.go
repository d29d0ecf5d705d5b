package cluster

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/check"
	"github.com/dockethq/docket/cluster/gossip"
)

// errNotCampaigning is what a node that awaits its first consistency
// check answers its own vote requests with while a checked server is
// alive: Raft counts the vote as not granted.
var errNotCampaigning = errors.New("not campaigning: this node has not passed a consistency check since it started, and a checked server is alive")

// campaignView is the gossip pool mayCampaign reads, set once the pool
// starts (after Raft does), and how many vote requests this node sent.
type campaignView struct {
	pool  atomic.Pointer[gossip.Gossip]
	asked atomic.Uint64
	// held and last bound a hold-back episode: the first and the latest
	// time this node held its vote requests back (Unix ns).
	held, last atomic.Int64
}

// campaignHold is Config.CampaignHold, or 10 election timeouts. A checked
// voter whose log is behind this node's cannot win (this node does not
// vote for it), so the hold must end, or the two would wait on each other
// for ever.
func (n *Node) campaignHold() time.Duration {
	if n.cfg.CampaignHold > 0 {
		return n.cfg.CampaignHold
	}
	return 10 * max(n.cfg.ElectionTimeout, n.cfg.HeartbeatTimeout)
}

// mayCampaign is nil unless this node awaits a consistency check and a
// voter of its cluster that passed one (it announces state and is not
// unchecked) is alive in gossip: that voter can lead and check this one. When every server awaits a check (a
// whole cluster restarted), all campaign, or none would ever lead.
func (n *Node) mayCampaign() error {
	if !errors.Is(n.check.Err(), check.ErrAwaitingCheck) {
		return nil
	}
	g := n.campaign.pool.Load()
	if g == nil {
		return nil
	}
	r := n.role.raft.Load()
	if r == nil {
		return nil
	}
	f := r.GetConfiguration() // a copy of the latest: it does not wait on Raft's loop
	if f.Error() != nil {
		return nil
	}
	voters := map[string]bool{}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters[string(s.ID)] = true
		}
	}
	mine := n.fsm.ClusterID()
	for _, m := range g.Members() {
		if m.ID == n.cfg.ID || !voters[m.ID] || m.Status != gossip.StatusAlive || !m.HasState || m.Unchecked || m.Leaving {
			continue
		}
		if mine != "" && m.Cluster != "" && m.Cluster != mine {
			continue
		}
		return n.holdCampaign(m.ID)
	}
	return nil
}

// holdCampaign refuses this vote request unless the episode of refusals
// has lasted campaignHold: then no checked voter could win, and this node
// campaigns after all.
func (n *Node) holdCampaign(checked string) error {
	now := time.Now().UnixNano()
	grace := int64(n.campaignHold())
	if last := n.campaign.last.Swap(now); now-last > grace { // a new episode
		n.campaign.held.Store(now)
	}
	if now-n.campaign.held.Load() > grace {
		n.log.Warn("campaigning before a consistency check passed on this node: no checked voter won an election", "checked_voter", checked)
		return nil
	}
	return fmt.Errorf("%w (%s)", errNotCampaigning, checked)
}
