package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cmd/docket/server"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/transport"
)

// sysNode is one in-process server: a real cluster.Node (Raft over TCP,
// raft-boltdb, Pebble) behind a real gRPC server on loopback.
type sysNode struct {
	t        *testing.T
	id, dir  string
	raftAddr string
	grpcAddr string
	// gossipAddr is "" until the first start binds a free port, which
	// restarts keep.
	gossipAddr string
	tune       func(*cluster.Config)
	api        func(*transport.Config) // nil: the defaults
	join       []string
	expect     int
	node       *cluster.Node
	srv        *server.Server
	running    bool
}

func testTune(c *cluster.Config) {
	c.ReapGrace = 300 * time.Millisecond
	c.ReapInterval = 50 * time.Millisecond
	c.PromoteInterval = 50 * time.Millisecond
	c.GossipLocal = true
}

// gossipAddrsOf lists the gossip addresses of nodes started so far: the
// next node's --join.
func gossipAddrsOf(nodes []*sysNode) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.gossipAddr)
	}
	return out
}

// startCluster starts size nodes that find each other through
// --bootstrap-expect and --join, as `docket dev` does.
func startCluster(t *testing.T, size int, tune func(*cluster.Config)) []*sysNode {
	t.Helper()
	return startClusterAPI(t, size, tune, transport.Config{})
}

// startClusterAPI is startCluster with the API servers configured by api.
func startClusterAPI(t *testing.T, size int, tune func(*cluster.Config), api transport.Config) []*sysNode {
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
	apply := func(c *transport.Config) { // the Logger set at start stays
		logger := c.Logger
		*c = api
		c.Logger = logger
	}
	var nodes []*sysNode
	for i := 0; i < size; i++ {
		n := &sysNode{t: t, id: fmt.Sprintf("n%d", i+1), dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)),
			raftAddr: "127.0.0.1:0", grpcAddr: addrs[i], tune: tune, api: apply, join: gossipAddrsOf(nodes), expect: size}
		n.start(lis[i])
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.stop()
		}
	})
	waitLeader(t, nodes)
	waitKnowLeader(t, nodes)
	return nodes
}

// waitKnowLeader waits until every running node can point at the leader's
// API, so that a raw stub to a follower is forwarded rather than refused.
func waitKnowLeader(t *testing.T, nodes []*sysNode) {
	t.Helper()
	testwait.For(t, 10*time.Second, "every node to know the leader", func() bool {
		for _, n := range nodes {
			if n.running && n.node.LeaderGRPCAddr() == "" {
				return false
			}
		}
		return true
	})
}

func (n *sysNode) start(lis net.Listener) {
	n.t.Helper()
	if lis == nil {
		var err error
		if lis, err = listenRetry(n.grpcAddr); err != nil {
			n.t.Fatal(err)
		}
	}
	cfg := cluster.DefaultConfig()
	cfg.ID, cfg.DataDir, cfg.RaftAddr, cfg.GRPCAddr = n.id, n.dir, n.raftAddr, n.grpcAddr
	cfg.BootstrapExpect, cfg.Join, cfg.GossipAddr = n.expect, n.join, n.gossipAddr
	if cfg.GossipAddr == "" {
		cfg.GossipAddr = "127.0.0.1:0"
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	testTune(&cfg)
	if n.tune != nil {
		n.tune(&cfg)
	}
	api := transport.Config{Logger: cfg.Logger}
	if n.api != nil {
		n.api(&api)
	}
	srv, err := server.Start(cfg, api, lis)
	if err != nil {
		n.t.Fatalf("start %s: %v", n.id, err)
	}
	n.srv, n.node = srv, srv.Node
	n.raftAddr = srv.Node.Status().GetRaftAddr() // keep the bound ports for restarts
	n.gossipAddr = srv.Node.GossipAddr()
	n.running = true
}

// listenRetry re-binds a port a stopped node just released.
func listenRetry(addr string) (net.Listener, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop is a graceful stop: API first, then leadership transfer and Raft.
func (n *sysNode) stop() {
	if !n.running {
		return
	}
	n.running = false
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.srv.Stop(ctx); err != nil {
		n.t.Errorf("%s: stop: %v", n.id, err)
	}
}

// crash stops the node without a leadership transfer.
func (n *sysNode) crash() {
	n.running = false
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := n.srv.Crash(ctx); err != nil {
		n.t.Errorf("%s: crash: %v", n.id, err)
	}
}

// holdsFor runs check over a window of d, every 20 ms: a negative (no
// promotion, no rogue member) has no state to wait for, only a time in
// which it must keep holding. check fails the test itself.
func holdsFor(t *testing.T, d time.Duration, check func()) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); {
		check()
		time.Sleep(20 * time.Millisecond)
	}
	check()
}

func waitLeader(t *testing.T, nodes []*sysNode) *sysNode {
	t.Helper()
	var leader *sysNode
	testwait.For(t, 10*time.Second, "a leader", func() bool {
		for _, n := range nodes {
			if n.running && n.node.IsLeader() {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

func followers(nodes []*sysNode, leader *sysNode) []*sysNode {
	var out []*sysNode
	for _, n := range nodes {
		if n != leader && n.running {
			out = append(out, n)
		}
	}
	return out
}

func addrsOf(nodes []*sysNode) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.grpcAddr)
	}
	return out
}

func mustClient(t *testing.T, addrs ...string) *client.Client {
	t.Helper()
	return mustClientWith(t, addrs)
}

// mustClientWith is mustClient with client options.
func mustClientWith(t *testing.T, addrs []string, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, addrs, opts...)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rawQueue is a gRPC stub bound to one node, bypassing the client's leader
// following, to show what that node itself does.
func rawQueue(t *testing.T, addr string) pb.QueueClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewQueueClient(conn)
}

// waitConverged waits until every running node applied the same index and
// then compares their keyspace hashes.
func waitConverged(t *testing.T, nodes []*sysNode) {
	t.Helper()
	var hashes map[string]string
	testwait.For(t, 10*time.Second, "nodes to converge", func() bool {
		var idx uint64
		hashes = map[string]string{}
		for _, n := range nodes {
			if !n.running {
				continue
			}
			a := n.node.FSM().AppliedIndex()
			if idx != 0 && a != idx {
				return false
			}
			idx = a
			h, err := n.node.FSM().Hash()
			if err != nil {
				t.Fatal(err)
			}
			hashes[n.id] = h
		}
		// Re-check the index: an apply between reads makes hashes incomparable.
		for _, n := range nodes {
			if n.running && n.node.FSM().AppliedIndex() != idx {
				return false
			}
		}
		return true
	})
	var ids []string
	for id := range hashes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids[1:] {
		if hashes[id] != hashes[ids[0]] {
			t.Fatalf("split brain: %s hash %s, %s hash %s", id, hashes[id], ids[0], hashes[ids[0]])
		}
	}
}
