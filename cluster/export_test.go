package cluster

import (
	"context"

	"github.com/dockethq/docket/cluster/membership"
)

// The node's own parts that its external tests (package cluster_test)
// reach: they run real nodes through cluster/internal/nodetest, which an
// in-package test cannot import.

// ForgetBarrier makes n, as leader, look freshly elected: its first
// Barrier has not returned yet.
func ForgetBarrier(n *Node) { n.readyTerm.Store(0) }

// VoteRequestsAsked counts the vote requests n's campaign gate let out.
func VoteRequestsAsked(n *Node) uint64 { return n.campaign.asked.Load() }

// HoldCampaign asks n's campaign gate about a vote request to id.
func HoldCampaign(n *Node, id string) error { return n.holdCampaign(id) }

// Announce records on n that server id announced level, as gossip does.
func Announce(n *Node, id string, level uint32) { n.peers.Put(membership.Peer{ID: id, Level: level}) }

// LatchOnce runs one step of n's feature-level latch.
func LatchOnce(ctx context.Context, n *Node) error { return n.latchOnce(ctx) }

// LogBytes is the byte count n's log store keeps for the log's budget.
func LogBytes(n *Node) uint64 { return n.store.Sizes().Bytes() }
