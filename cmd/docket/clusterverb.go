package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/dockethq/docket/client"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// cluster is `docket cluster status|transfer|remove|leave`: the shape of the
// cluster and an operator's changes to it.
func (v *verb) cluster(ctx context.Context, args []string) error {
	const what = "status | cluster transfer [ID] | cluster remove ID | cluster leave"
	pos, err := v.parse(args, 1, 2, what)
	if err != nil {
		return err
	}
	sub, pos := pos[0], pos[1:]
	if (sub != "status" && sub != "transfer" && sub != "remove" && sub != "leave") || ((sub == "status" || sub == "leave") && len(pos) > 0) || (sub == "remove" && len(pos) != 1) {
		return fmt.Errorf("%w: docket cluster %s", errUsage, what)
	}
	return v.withClient(ctx, func(ctx context.Context, c *client.Client) error {
		if sub == "leave" {
			// The node that leaves is the one named first in --addr.
			addr := splitList(v.c.addr)[0]
			if err := c.Leave(ctx, addr); err != nil {
				return err
			}
			return v.print(func(w io.Writer) { fmt.Fprintf(w, "%s left the cluster and stops\n", addr) }, &pb.LeaveResponse{})
		}
		if sub == "remove" {
			// RemoveServer of an id outside the configuration changes nothing
			// and answers OK: say so rather than "removed".
			st, err := c.Status(ctx)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(st.GetServers(), func(s *pb.Server) bool { return s.GetId() == pos[0] }) {
				return &failure{code: exitNotFound, msg: fmt.Sprintf("not found: server %s is not in the cluster's configuration (docket cluster status lists them)", pos[0]), err: client.ErrNotFound}
			}
			if err := c.RemoveServer(ctx, pos[0]); err != nil {
				return err
			}
			return v.print(func(w io.Writer) { fmt.Fprintf(w, "removed %s\n", pos[0]) }, &pb.RemoveServerResponse{})
		}
		if sub == "transfer" {
			to := ""
			if len(pos) == 1 {
				to = pos[0]
			}
			leader, err := c.TransferLeadership(ctx, to)
			if err != nil {
				return err
			}
			return v.print(func(w io.Writer) { fmt.Fprintf(w, "leader is now %s\n", leader) },
				&pb.TransferLeadershipResponse{LeaderId: leader})
		}
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		return v.print(func(w io.Writer) {
			fmt.Fprintf(w, "leader: %s at %s  term %d  commit %d\n", st.GetLeaderId(), st.GetLeaderGrpcAddr(), st.GetTerm(), st.GetCommitIndex())
			for _, s := range st.GetServers() {
				mark := " "
				if s.GetLeader() {
					mark = "*"
				}
				fmt.Fprintf(w, " %s %-6s grpc %-16s raft %-16s %-8s %-7s level %d  %s\n", mark, s.GetId(), s.GetGrpcAddr(), s.GetRaftAddr(),
					s.GetSuffrage(), s.GetHealth(), s.GetFeatureLevel(), s.GetVersion())
			}
			fmt.Fprintf(w, "failure tolerance: %d more may fail before the quorum is lost (%s's gossip view)\n", st.GetFailureTolerance(), st.GetNodeId())
			fmt.Fprintf(w, "features: cluster enabled level %d; %s's build applies up to %d\n",
				st.GetEnabledFeatureLevel(), st.GetNodeId(), st.GetFeatureLevel())
			if id := st.GetClusterId(); id != "" {
				fmt.Fprintf(w, "cluster id: %s (a node refuses peers of another)\n", id)
			}
			if cs := st.GetConsistency(); cs != nil {
				fmt.Fprintf(w, "consistency (%s): %s  last check at %d  majority %.12s  own %.12s\n",
					st.GetNodeId(), cs.GetStatus(), cs.GetIndex(), cs.GetMajorityHash(), cs.GetOwnHash())
				if cs.GetDetail() != "" {
					fmt.Fprintf(w, "  %s\n", cs.GetDetail())
				}
			}
		}, st)
	})
}
