package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cmd/docket/tlsgen"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/transport"
)

// pkiDir is a CA in a temp dir that signs certificates on demand.
type pkiDir struct {
	t   *testing.T
	dir string
}

func newPKIDir(t *testing.T) *pkiDir {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := tlsgen.CA(dir, 1); err != nil {
		t.Fatal(err)
	}
	return &pkiDir{t: t, dir: dir}
}

func (p *pkiDir) ca() string { return filepath.Join(p.dir, tlsgen.CAFile) }

func (p *pkiDir) files(o tlsgen.CertOptions) certs.Files {
	p.t.Helper()
	o.Dir = p.dir
	c, k, err := tlsgen.Cert(o)
	if err != nil {
		p.t.Fatal(err)
	}
	return certs.Files{CA: p.ca(), Cert: c, Key: k}
}

func (p *pkiDir) roots() *x509.CertPool {
	p.t.Helper()
	b, err := os.ReadFile(p.ca())
	if err != nil {
		p.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	return pool
}

func (p *pkiDir) pair(o tlsgen.CertOptions) tls.Certificate {
	p.t.Helper()
	f := p.files(o)
	c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// secure returns the tune and api functions that put a node on TLS with
// its own server certificate from pki (nil: plain, as before).
func secure(t *testing.T, pki *pkiDir, id string, auth certs.ClientAuth) (func(*cluster.Config), func(*transport.Config), *certs.Reloader) {
	t.Helper()
	quiet := func(c *cluster.Config) { c.CheckInterval = -1 } // keep the log still while attacks run
	if pki == nil {
		return quiet, nil, nil
	}
	r, err := certs.Load(pki.files(tlsgen.CertOptions{Name: id, Server: true}), nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *cluster.Config) { quiet(c); c.TLS = r },
		func(a *transport.Config) { a.TLS, a.ClientAuth = r, auth }, r
}

// startSecureCluster is startCluster with each node on TLS from pki.
func startSecureCluster(t *testing.T, size int, pki *pkiDir, auth certs.ClientAuth) ([]*sysNode, []*certs.Reloader) {
	t.Helper()
	var lis []net.Listener
	var addrs []string
	for i := 0; i < size; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis = append(lis, l)
		addrs = append(addrs, l.Addr().String())
	}
	base := t.TempDir()
	var nodes []*sysNode
	var reloaders []*certs.Reloader
	// A secure cluster keeps gossip encrypted too: a member without the
	// key is never seen, so never added (a rogue's Raft would fail the
	// TLS handshake anyway).
	var gossipKeys [][]byte
	if pki != nil {
		gossipKeys = [][]byte{mustGossipKey(t)}
	}
	for i := 0; i < size; i++ {
		id := fmt.Sprintf("n%d", i+1)
		tune, api, r := secure(t, pki, id, auth)
		tlsTune := tune
		tune = func(c *cluster.Config) {
			if tlsTune != nil {
				tlsTune(c)
			}
			c.GossipKeys = gossipKeys
		}
		n := &sysNode{t: t, id: id, dir: filepath.Join(base, id), raftAddr: "127.0.0.1:0", grpcAddr: addrs[i],
			tune: tune, api: api, join: gossipAddrsOf(nodes), expect: size}
		n.start(lis[i])
		nodes = append(nodes, n)
		reloaders = append(reloaders, r)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.stop()
		}
	})
	waitLeader(t, nodes)
	waitKnowLeader(t, nodes)
	return nodes, reloaders
}

// clusterState is what an attack must leave unchanged.
type clusterState struct {
	servers string
	applied uint64
	term    uint64
	leader  string
}

func stateOfCluster(t *testing.T, nodes []*sysNode) clusterState {
	t.Helper()
	// A new leader appends entries of its own once every server announced
	// its build (the feature-level latch, then the cluster's id); on a
	// loaded machine they can land after the attack began. Wait for them,
	// so that a changed applied index is the attack's doing.
	testwait.For(t, 30*time.Second, "the leader's start-up entries (latch, cluster id)", func() bool {
		l := waitLeader(t, nodes)
		return l.node.ClusterID() != "" && l.node.FSM().EnabledLevel() == l.node.FSM().MaxLevel()
	})
	waitConverged(t, nodes)
	l := waitLeader(t, nodes)
	st := l.node.Status()
	var ids []string
	for _, s := range st.GetServers() {
		ids = append(ids, s.GetId()+":"+s.GetSuffrage())
	}
	sort.Strings(ids)
	return clusterState{servers: strings.Join(ids, ","), applied: l.node.FSM().AppliedIndex(), term: st.GetTerm(), leader: l.id}
}

func hasServer(n *sysNode, id string) bool {
	for _, s := range n.node.Status().GetServers() {
		if s.GetId() == id {
			return true
		}
	}
	return false
}

// startRogue starts a node "evil" that joins nodes through their gossip
// addresses, as `docket agent --id evil --join ...` would, on TLS from
// its own pki (nil: plain), with no gossip key.
func startRogue(t *testing.T, nodes []*sysNode, pki *pkiDir) *sysNode {
	t.Helper()
	tune, api, _ := secure(t, pki, "evil", certs.VerifyIfGiven)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &sysNode{t: t, id: "evil", dir: t.TempDir(), raftAddr: "127.0.0.1:0", grpcAddr: l.Addr().String(),
		tune: tune, api: api, join: gossipAddrsOf(nodes)}
	r.start(l)
	t.Cleanup(r.stop)
	return r
}

// Test_AttackRogueNodeJoin is the rogue-node attack: `docket agent --id evil
// --join <node>` joined a plain cluster as a voter and received its data
// (the control shows it still does). A TLS cluster refuses a rogue with a
// server certificate of another CA, and one without TLS, at the handshake:
// it never learns a leader, is never added, and receives nothing.
func Test_AttackRogueNodeJoin(t *testing.T) {
	t.Run("plain_control", func(t *testing.T) {
		nodes, _ := startSecureCluster(t, 3, nil, 0)
		rogue := startRogue(t, nodes, nil)
		testwait.For(t, 10*time.Second, "the rogue to join the plain cluster", func() bool { return hasServer(waitLeader(t, nodes), "evil") })
		testwait.For(t, 10*time.Second, "the rogue to receive the log", func() bool { return rogue.node.FSM().AppliedIndex() > 0 })
	})

	pki := newPKIDir(t)
	nodes, _ := startSecureCluster(t, 3, pki, certs.VerifyIfGiven)
	if _, err := mustClientWith(t, addrsOf(nodes), client.WithTLS(pki.ca(), "", "")).Enqueue(testCtx(t), &pb.NewTask{Queue: "jobs", Payload: []byte("secret")}); err != nil {
		t.Fatal(err)
	}
	before := stateOfCluster(t, nodes)
	rogues := []*sysNode{startRogue(t, nodes, newPKIDir(t))}
	// A second rogue speaks plaintext; its own API is plaintext too.
	rogues = append(rogues, startRogue(t, nodes, nil))
	// A rogue alone in its pool retries its seeds every 500 ms: 6 rounds
	// give each one every chance the control's rogue needed.
	holdsFor(t, 3*time.Second, func() {
		for _, r := range rogues {
			if hasServer(waitLeader(t, nodes), r.id) || r.node.FSM().AppliedIndex() > 0 || r.node.LeaderGRPCAddr() != "" {
				t.Fatalf("rogue %s got in: member %v, applied %d, knows leader %q", r.grpcAddr,
					hasServer(waitLeader(t, nodes), r.id), r.node.FSM().AppliedIndex(), r.node.LeaderGRPCAddr())
			}
		}
	})
	if after := stateOfCluster(t, nodes); after != before {
		t.Fatalf("cluster state changed: %+v, before %+v", after, before)
	}
}

// apiHandshake dials addr with cfg and reads, so a refusal of the client's
// certificate (sent after the TLS 1.3 client finishes) shows up.
func apiHandshake(addr string, cfg *tls.Config) error {
	d := &net.Dialer{Timeout: 3 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	// gRPC's server speaks first (its SETTINGS frame) once the handshake
	// is accepted; a refused certificate gets an alert instead.
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = c.Read(make([]byte, 1))
	return err
}

// Test_AttackAPIClientCertificates: with --tls-client-auth require, a
// client without a certificate, with another CA's, with an expired one or
// speaking plaintext fails at the handshake; a client with a certificate
// of the CA works; nothing the refused ones sent changes the state.
func Test_AttackAPIClientCertificates(t *testing.T) {
	pki := newPKIDir(t)
	nodes, _ := startSecureCluster(t, 3, pki, certs.RequireClientCert)
	addr := waitLeader(t, nodes).grpcAddr
	good := pki.files(tlsgen.CertOptions{Name: "worker"})
	c := mustClientWith(t, addrsOf(nodes), client.WithTLS(good.CA, good.Cert, good.Key))
	if _, err := c.Enqueue(testCtx(t), &pb.NewTask{Queue: "jobs", Payload: []byte("x")}); err != nil {
		t.Fatalf("client with a CA certificate: %v", err)
	}
	before := stateOfCluster(t, nodes)

	base := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pki.roots(), NextProtos: []string{"h2"}, ServerName: "127.0.0.1"}
	// GetClientCertificate sends the certificate even when the server's
	// list of acceptable CAs does not name its issuer, as an attacker would.
	with := func(c tls.Certificate) *tls.Config {
		b := base.Clone()
		b.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
		return b
	}
	if err := apiHandshake(addr, with(pki.pair(tlsgen.CertOptions{Name: "ok"}))); err != nil {
		t.Fatalf("handshake with a CA client certificate: %v", err)
	}
	for name, cfg := range map[string]*tls.Config{
		"no_certificate": base,
		"other_ca":       with(newPKIDir(t).pair(tlsgen.CertOptions{Name: "stranger"})),
		"expired":        with(pki.pair(tlsgen.CertOptions{Name: "old", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})),
	} {
		err := apiHandshake(addr, cfg)
		if err == nil || !strings.Contains(err.Error(), "tls:") {
			t.Errorf("%s: handshake %v, want a TLS refusal", name, err)
		} else {
			t.Logf("%s: refused: %v", name, err)
		}
		// The same client through gRPC: the call fails, nothing is done.
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = pb.NewQueueClient(cc).Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "jobs", Payload: []byte("forged")}}})
		cancel()
		_ = cc.Close()
		if err == nil {
			t.Errorf("%s: Enqueue succeeded", name)
		}
	}
	plain := rawQueue(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := plain.Stats(ctx, &pb.StatsRequest{}); err == nil {
		t.Error("plaintext Stats on a TLS port succeeded")
	}
	if after := stateOfCluster(t, nodes); after != before {
		t.Fatalf("cluster state changed: %+v, before %+v", after, before)
	}
}

// Test_TLSClusterForwardsAndServesCLI: on a TLS cluster a follower
// forwards over TLS (its server certificate passes the leader's required
// client auth), and CLI verbs reach it with --tls-*.
func Test_TLSClusterForwardsAndServesCLI(t *testing.T) {
	pki := newPKIDir(t)
	nodes, _ := startSecureCluster(t, 3, pki, certs.RequireClientCert)
	leader := waitLeader(t, nodes)
	f := followers(nodes, leader)[0]
	w := pki.files(tlsgen.CertOptions{Name: "worker"})
	cfg, err := client.TLSConfig(w.CA, w.Cert, w.Key)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(f.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := pb.NewQueueClient(cc).Enqueue(testCtx(t), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "jobs", Payload: []byte("via follower")}}}); err != nil {
		t.Fatalf("enqueue through a follower over TLS: %v", err)
	}

	var out, errOut bytes.Buffer
	args := []string{"stats", "--addr", strings.Join(addrsOf(nodes), ","), "--tls-ca", w.CA, "--tls-cert", w.Cert, "--tls-key", w.Key, "--json"}
	if err := run(testCtx(t), args, &out, &errOut); err != nil || !strings.Contains(out.String(), "jobs") {
		t.Fatalf("docket stats with --tls-*: %v, out %q, stderr %q", err, out.String(), errOut.String())
	}
	out.Reset()
	err = run(testCtx(t), []string{"stats", "--addr", leader.grpcAddr, "--timeout", "1s"}, &out, &errOut)
	if err == nil {
		t.Fatal("docket stats without --tls-* reached a TLS cluster")
	}
}

// Test_TLSReloadOnSIGHUP: replacing a node's certificate files and sending
// SIGHUP (through the agent's reload loop) makes the next handshake see
// the new certificate; the cluster keeps replicating.
func Test_TLSReloadOnSIGHUP(t *testing.T) {
	pki := newPKIDir(t)
	nodes, reloaders := startSecureCluster(t, 3, pki, certs.VerifyIfGiven)
	n1 := nodes[0]
	serial := func() string {
		t.Helper()
		var got string
		cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pki.roots(), ServerName: certs.ServerName, NextProtos: []string{"h2"},
			VerifyConnection: func(cs tls.ConnectionState) error { got = cs.PeerCertificates[0].SerialNumber.String(); return nil }}
		if err := apiHandshake(n1.grpcAddr, cfg); err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := serial()
	files := pki.files(tlsgen.CertOptions{Name: "n1-next", Server: true})
	for _, mv := range [][2]string{{files.Cert, filepath.Join(pki.dir, "n1.pem")}, {files.Key, filepath.Join(pki.dir, "n1-key.pem")}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if got := serial(); got != first {
		t.Fatalf("certificate changed before any reload")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hup := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() { defer close(done); reloadOnHUP(ctx, hup, reloaders[0], slog.New(slog.DiscardHandler)) }()
	hup <- syscall.SIGHUP
	testwait.For(t, 5*time.Second, "a handshake with the new certificate", func() bool { return serial() != first })
	cancel()
	<-done
	c := mustClientWith(t, addrsOf(nodes), client.WithTLS(pki.ca(), "", ""))
	if _, err := c.Enqueue(testCtx(t), &pb.NewTask{Queue: "jobs", Payload: []byte("after reload")}); err != nil {
		t.Fatalf("enqueue after reload: %v", err)
	}
	waitConverged(t, nodes)
}

func Test_DebugAddrMustBeLoopback(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:0", "[::1]:7800", "localhost:7800", "127.0.0.2:1"} {
		if err := checkDebugAddr(ok, false); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	err := run(testCtx(t), []string{"agent", "--id", "x", "--data-dir", t.TempDir(), "--debug-addr", "0.0.0.0:0"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--debug-addr") {
		t.Fatalf("agent --debug-addr 0.0.0.0:0: %v, want an error naming the flag", err)
	}
	err = run(testCtx(t), []string{"agent", "--id", "x", "--data-dir", t.TempDir(), "--tls-client-auth", "require"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--tls-client-auth") {
		t.Fatalf("agent --tls-client-auth without certificates: %v, want an error naming the flag", err)
	}
	for _, bad := range []string{":7800", "10.0.0.1:7800", "example.com:80"} {
		if err := checkDebugAddr(bad, false); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Test_AgentFlagsCarryNoSecrets: /debug/pprof/cmdline shows the agent's
// command line to whoever reaches --debug-addr, so no agent flag may take a
// secret itself; secrets come from files (a flag naming a path) or the
// environment. --tls-key is the key's path, not the key.
func Test_AgentFlagsCarryNoSecrets(t *testing.T) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	agentFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "tls-key" || strings.HasSuffix(f.Name, "-file") {
			return
		}
		for _, word := range []string{"token", "secret", "password", "key"} {
			if strings.Contains(f.Name, word) {
				t.Errorf("agent flag --%s looks like it takes a secret; take a file path or an environment variable instead", f.Name)
			}
		}
	})
}

// Test_TLSVerbWritesFiles: `docket tls ca` and `docket tls cert` write what
// the agent and the client load.
func Test_TLSVerbWritesFiles(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	for _, args := range [][]string{
		{"tls", "ca", "--dir", dir},
		{"tls", "cert", "--server", "--name", "n1", "--dir", dir, "--dns", "n1.internal", "--ip", "10.0.0.5"},
		{"tls", "cert", "--client", "--name", "alice", "--dir", dir},
	} {
		if err := run(testCtx(t), args, &out, &out); err != nil {
			t.Fatalf("docket %v: %v (%s)", args, err, out.String())
		}
	}
	if _, err := certs.Load(certs.Files{CA: filepath.Join(dir, "docket-ca.pem"), Cert: filepath.Join(dir, "n1.pem"), Key: filepath.Join(dir, "n1-key.pem")}, nil); err != nil {
		t.Fatalf("load the server certificate: %v", err)
	}
	if _, err := client.TLSConfig(filepath.Join(dir, "docket-ca.pem"), filepath.Join(dir, "alice.pem"), filepath.Join(dir, "alice-key.pem")); err != nil {
		t.Fatalf("load the client certificate: %v", err)
	}
	for _, bad := range [][]string{
		{"tls", "cert", "--dir", dir},
		{"tls", "cert", "--server", "--client", "--dir", dir},
		{"tls", "cert", "--client", "--name", "x", "--ip", "nope", "--dir", dir},
		{"tls", "ca", "--dir", dir}, // exists
		{"tls", "nope"},
	} {
		if err := run(testCtx(t), bad, &out, &out); err == nil {
			t.Errorf("docket %v succeeded", bad)
		}
	}
}
