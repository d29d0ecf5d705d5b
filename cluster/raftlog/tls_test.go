package raftlog_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cmd/docket/tlsgen"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
)

// testPKI is a cluster CA in a temp dir.
type testPKI struct {
	t   *testing.T
	dir string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := tlsgen.CA(dir, 1); err != nil {
		t.Fatal(err)
	}
	return &testPKI{t: t, dir: dir}
}

func (p *testPKI) files(o tlsgen.CertOptions) certs.Files {
	p.t.Helper()
	o.Dir = p.dir
	c, k, err := tlsgen.Cert(o)
	if err != nil {
		p.t.Fatal(err)
	}
	return certs.Files{CA: filepath.Join(p.dir, tlsgen.CAFile), Cert: c, Key: k}
}

func (p *testPKI) reloader(o tlsgen.CertOptions) *certs.Reloader {
	p.t.Helper()
	r, err := certs.Load(p.files(o), nil)
	if err != nil {
		p.t.Fatal(err)
	}
	return r
}

// tlsPair is a certificate's tls.Certificate, expired ones included.
func (p *testPKI) pair(o tlsgen.CertOptions) tls.Certificate {
	p.t.Helper()
	f := p.files(o)
	c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// mustTLSCluster is mustCluster with every node on mutual TLS (pki nil:
// plain TCP, for the attacks' control runs).
func mustTLSCluster(t *testing.T, size int, pki *testPKI) []*cluster.Node {
	t.Helper()
	cfg := func(id string, expect int) cluster.Config {
		c := nodetest.Config(t, id, expect)
		c.CheckInterval = -1 // no Check entries: the applied index stays put while idle
		if pki != nil {
			c.TLS = pki.reloader(tlsgen.CertOptions{Name: id, Server: true})
			c.RaftHandshakeTimeout = 300 * time.Millisecond
		}
		return c
	}
	nodes := []*cluster.Node{nodetest.Start(t, cfg("n1", 1))}
	testwait.For(t, 5*time.Second, "n1 leader", nodes[0].IsLeader)
	for i := 2; i <= size; i++ {
		n := nodetest.Start(t, cfg(fmt.Sprintf("n%d", i), 0))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := nodes[0].AddServer(ctx, n.ID(), n.Internals().Config.RaftAddr, "", false)
		cancel()
		if err != nil {
			t.Fatalf("add %s: %v", n.ID(), err)
		}
		nodes = append(nodes, n)
	}
	return nodes
}

func Test_TLSRaftReplicates(t *testing.T) {
	nodes := mustTLSCluster(t, 3, newTestPKI(t))
	l := nodetest.LeaderOf(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 20; i++ {
		if _, err := l.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", fmt.Sprint(i))); err != nil {
			t.Fatalf("propose %d: %v", i, err)
		}
	}
	last := l.FSM().AppliedIndex()
	testwait.For(t, 5*time.Second, "followers to apply over TLS", func() bool {
		for _, n := range nodes {
			if n.FSM().AppliedIndex() < last {
				return false
			}
		}
		return true
	})
}

// attackStream is an outsider's Raft stream layer: plain TCP when cfg is
// nil, else TLS with whatever certificate the attacker holds.
type attackStream struct {
	net.Listener
	cfg *tls.Config
}

func (s attackStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if s.cfg == nil {
		return d.Dial("tcp", string(addr))
	}
	return tls.DialWithDialer(d, "tcp", string(addr), s.cfg)
}

// forgeAppend sends one AppendEntries to target as a leader of a newer
// term would: it carries an Enqueue into queue "evil" right after the
// target's last entry, and a commit index that covers it (the forged-AppendEntries
// attack). It returns the RPC's error and whether the target accepted.
func forgeAppend(t *testing.T, target *cluster.Node, cfg *tls.Config) (bool, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	trans := raft.NewNetworkTransport(attackStream{Listener: ln, cfg: cfg}, 1, 2*time.Second, io.Discard)
	defer trans.Close()
	last := target.Internals().Raft.LastIndex()
	var prev raft.Log
	if err := target.Internals().Logs.GetLog(last, &prev); err != nil {
		t.Fatal(err)
	}
	cmd := nodetest.EnqueueCmd("evil", "injected")
	cmd.Now = time.Now().UnixNano()
	data, err := fsm.EncodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	term := target.Internals().Raft.CurrentTerm() + 1
	req := &raft.AppendEntriesRequest{
		RPCHeader:    raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte(ln.Addr().String())},
		Term:         term,
		PrevLogEntry: last, PrevLogTerm: prev.Term,
		Entries: []*raft.Log{{Index: last + 1, Term: term, Type: raft.LogCommand, Data: data,
			Extensions: fsm.CommandExtension(data, fsm.LevelBase), AppendedAt: time.Now()}},
		LeaderCommitIndex: last + 1,
	}
	var resp raft.AppendEntriesResponse
	err = trans.AppendEntries(raft.ServerID(target.ID()), raft.ServerAddress(target.Internals().Config.RaftAddr), req, &resp)
	return err == nil && resp.Success, err
}

func evilPending(t *testing.T, n *cluster.Node) uint64 {
	t.Helper()
	p, _, err := n.FSM().Counts("evil", "default")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// raftState is what an attack must leave unchanged on a node.
type raftState struct{ term, last, applied uint64 }

func stateOf(n *cluster.Node) raftState {
	return raftState{term: n.Internals().Raft.CurrentTerm(), last: n.Internals().Raft.LastIndex(), applied: n.FSM().AppliedIndex()}
}

func follower(t *testing.T, nodes []*cluster.Node) *cluster.Node {
	t.Helper()
	l := nodetest.LeaderOf(t, nodes)
	last := l.FSM().AppliedIndex()
	for _, n := range nodes {
		if n != l {
			testwait.For(t, 5*time.Second, "the follower to catch up", func() bool { return n.FSM().AppliedIndex() >= last })
			return n
		}
	}
	t.Fatal("no follower")
	return nil
}

// Test_ForgedAppendEntries is the forged-AppendEntries attack. Against plain TCP (the
// control: the attack as it worked before TLS) one forged AppendEntries
// commits an Enqueue on the follower. Against mutual TLS, the same bytes,
// and the same request over TLS with a worker's client certificate, an
// expired server certificate or another CA's server certificate, are
// refused at the handshake and change nothing.
func Test_ForgedAppendEntries(t *testing.T) {
	t.Run("plain_control", func(t *testing.T) {
		f := follower(t, mustTLSCluster(t, 3, nil))
		ok, err := forgeAppend(t, f, nil)
		if !ok || err != nil {
			t.Fatalf("forged append on plain TCP: accepted %v, err %v; the control expects the attack to work", ok, err)
		}
		testwait.For(t, 5*time.Second, "the injected task to apply", func() bool { return evilPending(t, f) == 1 })
	})

	pki := newTestPKI(t)
	nodes := mustTLSCluster(t, 3, pki)
	f := follower(t, nodes)
	other := newTestPKI(t)
	// Every node, not only f, must have settled before the snapshot: a
	// follower still joining would change state with no attack at all.
	l := nodetest.LeaderOf(t, nodes)
	testwait.For(t, 10*time.Second, "every node to settle on the leader's state", func() bool {
		want := stateOf(l)
		for _, n := range nodes {
			if stateOf(n) != want {
				return false
			}
		}
		return true
	})
	before := map[*cluster.Node]raftState{}
	for _, n := range nodes {
		before[n] = stateOf(n)
	}
	leaderBefore, _ := nodetest.LeaderOf(t, nodes).Leader()
	roots := pki.reloader(tlsgen.CertOptions{Name: "roots", Server: true}).PeerClientConfig().RootCAs
	client := func(c tls.Certificate) *tls.Config {
		return &tls.Config{MinVersion: certs.MinVersion, ServerName: certs.ServerName, RootCAs: roots, Certificates: []tls.Certificate{c}}
	}
	attacks := []struct {
		name string
		cfg  *tls.Config
	}{
		{"plain_tcp", nil},
		{"tls_no_certificate", &tls.Config{MinVersion: certs.MinVersion, ServerName: certs.ServerName, RootCAs: roots}},
		{"client_certificate_of_the_ca", client(pki.pair(tlsgen.CertOptions{Name: "worker"}))},
		{"expired_server_certificate", client(pki.pair(tlsgen.CertOptions{Name: "old", Server: true,
			NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}))},
		{"other_ca_server_certificate", client(other.pair(tlsgen.CertOptions{Name: "rogue", Server: true}))},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			ok, err := forgeAppend(t, f, a.cfg)
			if ok || err == nil {
				t.Fatalf("forged append accepted over %s (err %v)", a.name, err)
			}
			t.Logf("refused: %v", err)
		})
	}
	if got := evilPending(t, f); got != 0 {
		t.Errorf("follower holds %d injected tasks", got)
	}
	for _, n := range nodes {
		if got := stateOf(n); got != before[n] {
			t.Errorf("%s: state %+v after the attacks, %+v before", n.ID(), got, before[n])
		}
	}
	if id, _ := nodetest.LeaderOf(t, nodes).Leader(); id != leaderBefore {
		t.Errorf("leader %s after the attacks, %s before", id, leaderBefore)
	}
}

// Test_TLSRaftHandshakeDeadline: a connection that never starts its
// handshake is closed after RaftHandshakeTimeout, so it gives its
// connection slot back.
func Test_TLSRaftHandshakeDeadline(t *testing.T) {
	nodes := mustTLSCluster(t, 1, newTestPKI(t))
	c, err := net.Dial("tcp", nodes[0].Internals().Config.RaftAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("silent connection still open after 5 s (handshake deadline 300 ms)")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("closed after %v, want about the 300 ms deadline", took)
	}
}
