package transport

import (
	"crypto/tls"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cluster/memnode"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/cmd/docket/tlsgen"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// tlsFiles writes a certificate of the CA in dir.
func tlsFiles(t *testing.T, dir, name string, server bool) certs.Files {
	t.Helper()
	c, k, err := tlsgen.Cert(tlsgen.CertOptions{Dir: dir, Name: name, Server: server})
	if err != nil {
		t.Fatal(err)
	}
	return certs.Files{CA: filepath.Join(dir, tlsgen.CAFile), Cert: c, Key: k}
}

// serveTLS serves node over TLS with a server certificate of the CA in
// dir, and returns its address.
func serveTLS(t *testing.T, node *memnode.Node, dir, name, leaderAddr string) string {
	t.Helper()
	r, err := certs.Load(tlsFiles(t, dir, name, true), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, addr := serve(t, node, leaderAddr, Config{TLS: r, ClientAuth: certs.VerifyIfGiven})
	return addr
}

// A Claim sent to a follower is checked there, once, and the leader does
// not check it again before it proposes: the follower forwarded it over
// TLS with its server certificate. A client that sets the forwarded header
// itself proves nothing, and the leader checks its request.
func Test_ForwardedClaimCheckedOnceOnTheFollower(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := tlsgen.CA(dir, 1); err != nil {
		t.Fatal(err)
	}
	leader := newMemNode(t, true, service.ServiceConfig{})
	follower := newMemNode(t, false, service.ServiceConfig{})
	leaderAddr := serveTLS(t, leader, dir, "n1", "")
	followerAddr := serveTLS(t, follower, dir, "n2", leaderAddr)

	worker := tlsFiles(t, dir, "worker", false)
	pair, err := tls.LoadX509KeyPair(worker.Cert, worker.Key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certs.Load(worker, nil) // the worker's view of the CA
	if err != nil {
		t.Fatal(err)
	}
	dial := func(addr string) pb.QueueClient {
		cfg := ca.PeerClientConfig()
		cfg.Certificates = []tls.Certificate{pair}
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		return pb.NewQueueClient(cc)
	}
	ctx := testCtx(t)
	req := &pb.ClaimRequest{Queue: "q", WorkerId: "w"}
	if _, err := dial(followerAddr).Claim(ctx, req); err != nil {
		t.Fatalf("claim through the follower: %v", err)
	}
	if f, l := follower.Service().Checks(), leader.Service().Checks(); f != 1 || l != 0 {
		t.Fatalf("checks: follower %d, leader %d; want 1 and 0", f, l)
	}
	// The worker claims to have been forwarded; the leader checks anyway.
	fake := metadata.AppendToOutgoingContext(ctx, pb.MetadataForwarded, "1")
	if _, err := dial(leaderAddr).Claim(fake, req); err != nil {
		t.Fatalf("claim on the leader: %v", err)
	}
	if l := leader.Service().Checks(); l != 1 {
		t.Fatalf("leader checks after a self-forwarded claim: %d, want 1", l)
	}
}

// A negative wait_ns is refused with the request's other checks, naming
// its field, before anything waits or is proposed.
func Test_ClaimNegativeWaitRefused(t *testing.T) {
	ts := mustLeader(t, Config{})
	before := ts.node.Service().Checks()
	_, err := ts.q.Claim(testCtx(t), &pb.ClaimRequest{Queue: "q", WorkerId: "w", WaitNs: -1})
	if code, _, field := details(err); code != codes.InvalidArgument || field != "wait_ns" {
		t.Fatalf("negative wait: %v, want InvalidArgument on wait_ns", err)
	}
	if got := ts.node.Service().Checks() - before; got != 0 {
		t.Fatalf("the command was checked %d times after its wait was refused, want 0", got)
	}
}
