package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/transport"
)

// sysAuthOn is a variable so that the test can be run against a cluster
// without auth, where the replayed token is accepted (how it failed first).
var sysAuthOn = true

// Test_AuthReplayAfterRevokeOnEveryNode (attack 5 of the token attacks): a token
// that every node accepted is refused by each node once that node applied
// the revoke, for a stale read that node answers alone, and the state is
// unchanged by the replays.
func Test_AuthReplayAfterRevokeOnEveryNode(t *testing.T) {
	const boot = "bootstrap-secret-for-the-test"
	nodes := startClusterAPI(t, 3, func(c *cluster.Config) { c.BootstrapSecret = boot }, transport.Config{Auth: sysAuthOn})
	ctx := ctxT(t, 30*time.Second)
	admin := mustClientWith(t, addrsOf(nodes), client.WithToken(boot))
	var tok *pb.CreateTokenResponse
	testwait.For(t, 10*time.Second, "the bootstrap token", func() bool {
		var err error
		tok, err = admin.CreateToken(ctx, &pb.CreateTokenRequest{Name: "p", Roles: []string{pb.RoleProducer, pb.RoleReader}, Tenants: []string{"a"}})
		return err == nil
	})
	prod := mustClientWith(t, addrsOf(nodes), client.WithToken(tok.GetSecret()), client.WithRequestTenant("a"))
	id, err := prod.EnqueueOne(ctx, "q", []byte("x"), client.TaskTenant("a"))
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	waitConverged(t, nodes)
	stale := func(n *sysNode, secret string) error {
		c := metadata.AppendToOutgoingContext(ctx, pb.MetadataAuthorization, "Bearer "+secret)
		_, err := rawQueue(t, n.grpcAddr).GetTask(c, &pb.GetTaskRequest{TaskId: id, Tenant: "a", AllowStale: true})
		return err
	}
	for _, n := range nodes {
		if err := stale(n, tok.GetSecret()); err != nil {
			t.Fatalf("%s before the revoke: %v", n.id, err)
		}
	}
	if err := admin.RevokeToken(ctx, tok.GetAccessor()); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	leader := waitLeader(t, nodes)
	revokedAt := leader.node.FSM().AppliedIndex()
	for _, n := range nodes {
		testwait.For(t, 10*time.Second, n.id+" to apply the revoke", func() bool { return n.node.FSM().AppliedIndex() >= revokedAt })
		// The leader refuses the token. A follower does not hold it any
		// more either; it names the leader, whose answer is final (a token
		// a lagging replica does not know must not be refused there), and
		// a client that follows it ends in Unauthenticated.
		err := stale(n, tok.GetSecret())
		switch got := status.Code(err); {
		case got == codes.Unauthenticated:
		case got == codes.Unavailable && n != leader && strings.Contains(err.Error(), "unknown to this replica"):
			via := mustClientWith(t, []string{n.grpcAddr}, client.WithToken(tok.GetSecret()), client.WithRequestTenant("a"))
			if _, err := via.ReadTaskStale(ctx, id); !errors.Is(err, client.ErrUnauthenticated) {
				t.Fatalf("%s: replayed token through a client: %v, want Unauthenticated", n.id, err)
			}
		default:
			t.Fatalf("%s: replayed token answered %v (%v), want it refused", n.id, got, err)
		}
	}
	_, err = prod.EnqueueOne(ctx, "q", []byte("y"), client.TaskTenant("a"))
	if sysAuthOn && !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("enqueue with the revoked token: %v", err)
	}
	st, err := admin.Stats(ctx, "q", "a")
	if err != nil || len(st) != 1 || st[0].GetPending() != 1 {
		t.Fatalf("state after replays: %v %v", st, err)
	}
	waitConverged(t, nodes)
}
