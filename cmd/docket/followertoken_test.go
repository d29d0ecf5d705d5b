package main

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/transport"
)

// Test_TokenOnFollowerAskedOfLeader: a follower whose replica does not
// know a token asks the leader before it answers. A revoked or made-up
// token is Unauthenticated there, as on the leader, instead of a
// NOT_LEADER the client would chase; a valid token works through every
// node; and a follower with no leader to ask answers Unavailable with a
// sentence that says so, not a not-leader answer with an empty hint.
func Test_TokenOnFollowerAskedOfLeader(t *testing.T) {
	const boot = "bootstrap-secret-for-the-test"
	nodes := startClusterAPI(t, 3, func(c *cluster.Config) { c.BootstrapSecret = boot }, transport.Config{Auth: true})
	ctx := ctxT(t, 60*time.Second)
	admin := mustClientWith(t, addrsOf(nodes), client.WithToken(boot))
	var tok *pb.CreateTokenResponse
	testwait.For(t, 10*time.Second, "the bootstrap token", func() bool {
		var err error
		tok, err = admin.CreateToken(ctx, &pb.CreateTokenRequest{Name: "w", Roles: []string{pb.RoleProducer, pb.RoleReader}, Tenants: []string{"a"}})
		return err == nil
	})
	prod := mustClientWith(t, addrsOf(nodes), client.WithToken(tok.GetSecret()), client.WithRequestTenant("a"))
	id, err := prod.EnqueueOne(ctx, "q", []byte("x"), client.TaskTenant("a"))
	if err != nil {
		t.Fatal(err)
	}
	leader := waitLeader(t, nodes)
	fol := followers(nodes, leader)
	stale := func(n *sysNode, secret string) error {
		c := metadata.AppendToOutgoingContext(ctx, pb.MetadataAuthorization, "Bearer "+secret)
		_, err := rawQueue(t, n.grpcAddr).GetTask(c, &pb.GetTaskRequest{TaskId: id, Tenant: "a", AllowStale: true})
		return err
	}
	waitConverged(t, nodes)
	for _, n := range nodes {
		if err := stale(n, tok.GetSecret()); err != nil {
			t.Fatalf("%s: a valid token: %v", n.id, err)
		}
	}

	// Revoked, and never issued: refused by every follower itself.
	if err := admin.RevokeToken(ctx, tok.GetAccessor()); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, nodes)
	for _, n := range fol {
		for name, secret := range map[string]string{"revoked": tok.GetSecret(), "made-up": "no-such-token-anywhere"} {
			if err := stale(n, secret); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("%s: a %s token answered %v, want Unauthenticated", n.id, name, err)
			}
		}
	}

	// No leader to ask: the last node standing says so.
	left := fol[0]
	for _, n := range nodes {
		if n != left {
			n.crash()
		}
	}
	testwait.For(t, 20*time.Second, left.id+" to know no leader", func() bool { return left.node.LeaderGRPCAddr() == "" })
	err = stale(left, "another-token-nobody-issued") // not one the leader answered about
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "no leader") {
		t.Fatalf("no leader to ask: %v, want Unavailable saying there is no leader", err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == pb.ReasonNotLeader {
			t.Fatalf("no leader to ask: answered %v with reason NOT_LEADER and no leader to name", err)
		}
	}
	t.Logf("no leader to ask: %v", st.Message())
}
