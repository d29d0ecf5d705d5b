package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// An operator's mistakes name what is missing: removing a server the
// configuration does not hold is cluster.ErrUnknownServer (it answered OK, and the
// CLI printed "removed"), and revoking an unknown token says token, not
// task.
func Test_UnknownServerAndTokenAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes := nodetest.Cluster(t, 1)
	n := nodes[0]
	if err := n.RemoveServer(ctx, "n99"); !errors.Is(err, cluster.ErrUnknownServer) {
		t.Fatalf("remove n99: %v, want cluster.ErrUnknownServer", err)
	}
	if _, err := n.Service().Propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_FEATURE_LEVEL,
		Body: &pb.Command_SetFeatureLevel{SetFeatureLevel: &pb.SetFeatureLevelCmd{Level: fsm.FeatureLevel}}}); err != nil {
		t.Fatal(err)
	}
	err := n.Service().RevokeToken(ctx, "0123456789abcdef01234567")
	if !errors.Is(err, pb.ErrNotFound) || !strings.Contains(err.Error(), "token") || strings.Contains(err.Error(), "task") {
		t.Fatalf("revoke an unknown token: %v, want pb.ErrNotFound worded for a token", err)
	}
}

// A leader answers for a token only once it has applied what the leaders
// before it committed: a revoke that an earlier leader acknowledged may
// sit in the log it is still applying, and accepting the token meanwhile
// would undo the revoke for a moment (a revoked token opened a dashboard
// page through a freshly elected leader under load).
func Test_LeaderAuthenticatesOnlyWhenCaughtUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := nodetest.Cluster(t, 1)[0]
	if _, err := n.Service().Propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_FEATURE_LEVEL,
		Body: &pb.Command_SetFeatureLevel{SetFeatureLevel: &pb.SetFeatureLevelCmd{Level: fsm.FeatureLevel}}}); err != nil {
		t.Fatal(err)
	}
	tok, err := n.Service().CreateToken(ctx, &pb.CreateTokenRequest{Name: "t", Roles: []string{pb.RoleReader}, Tenants: []string{pb.AllTenants}})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the leader's first barrier", n.LeaderCaughtUp)
	if _, err := n.Service().Authenticate(tok.GetSecret()); err != nil {
		t.Fatalf("a caught-up leader refused a live token: %v", err)
	}
	cluster.ForgetBarrier(n) // as right after an election, before the barrier returns
	var nl *replica.NotLeaderError
	if _, err := n.Service().Authenticate(tok.GetSecret()); !errors.As(err, &nl) {
		t.Fatalf("a leader still applying earlier terms answered for a token: %v", err)
	}
}
