package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
)

// freezeProxy stands in front of a node's gRPC listener. Until frozen it
// forwards bytes both ways. Frozen, it still accepts connections and holds
// the open ones, but forwards nothing: what a client sees of a process
// stopped with SIGSTOP, whose kernel keeps completing TCP handshakes.
type freezeProxy struct {
	lis    net.Listener
	target string
	frozen chan struct{}
	once   sync.Once
	done   chan struct{}

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
	moved atomic.Int64 // bytes forwarded, both ways
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{lis: lis, target: target, frozen: make(chan struct{}), done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p
}

func (p *freezeProxy) addr() string { return p.lis.Addr().String() }

func (p *freezeProxy) freeze() { p.once.Do(func() { close(p.frozen) }) }

func (p *freezeProxy) isFrozen() bool {
	select {
	case <-p.frozen:
		return true
	default:
		return false
	}
}

func (p *freezeProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		_ = c.Close()
		return false
	default:
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *freezeProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		if !p.track(in) || p.isFrozen() {
			continue // held open, never read: a stopped process's backlog
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil || !p.track(out) {
			_ = in.Close()
			continue
		}
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies src to dst until either fails or the proxy freezes; a frozen
// pipe drops what it read and stops, leaving both connections open.
func (p *freezeProxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.isFrozen() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			p.moved.Add(int64(n))
		}
		if err != nil {
			if err != io.EOF {
				_ = dst.Close()
			} else if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

// close releases every connection and waits for the proxy's goroutines.
func (p *freezeProxy) close() {
	_ = p.lis.Close()
	p.mu.Lock()
	close(p.done)
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// startProxiedCluster is startCluster with a freezeProxy in front of each
// node's API: the proxy's address is the one the node advertises, so
// clients and forwarding followers both go through it.
func startProxiedCluster(t *testing.T, size int) ([]*sysNode, []*freezeProxy) {
	t.Helper()
	var lis []net.Listener
	var proxies []*freezeProxy
	var addrs []string
	for i := 0; i < size; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis = append(lis, l)
		p := newFreezeProxy(t, l.Addr().String())
		proxies = append(proxies, p)
		addrs = append(addrs, p.addr())
	}
	base := t.TempDir()
	var nodes []*sysNode
	t.Cleanup(func() {
		for _, n := range nodes {
			n.stop()
		}
	})
	// Registered after the nodes' clean-up, so it runs first: a frozen
	// proxy would otherwise hold a graceful stop until its timeout.
	t.Cleanup(func() {
		for _, p := range proxies {
			p.close()
		}
	})
	for i := 0; i < size; i++ {
		n := &sysNode{t: t, id: fmt.Sprintf("n%d", i+1), dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)),
			raftAddr: "127.0.0.1:0", grpcAddr: addrs[i], join: gossipAddrsOf(nodes), expect: size}
		n.start(lis[i])
		nodes = append(nodes, n)
	}
	waitLeader(t, nodes)
	waitKnowLeader(t, nodes)
	return nodes, proxies
}

// Test_FrozenLeaderCostsAboutAnElection: the leader's process freezes (its
// API accepts connections and answers nothing; its Raft goes silent) while
// a caller with a 5 s deadline enqueues through the Go client with its
// default options. The others elect a new leader, and the call succeeds
// there after about one attempt timeout, not at the caller's deadline.
func Test_FrozenLeaderCostsAboutAnElection(t *testing.T) {
	nodes, proxies := startProxiedCluster(t, 3)
	leader := waitLeader(t, nodes)
	c := mustClient(t, addrsOf(nodes)...)
	warm, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.EnqueueOne(warm, "frozen", []byte("before")); err != nil {
		t.Fatal(err)
	}
	if c.Leader() != leader.grpcAddr {
		t.Fatalf("client follows %q, leader is %s at %s", c.Leader(), leader.id, leader.grpcAddr)
	}

	for i, n := range nodes {
		if n == leader {
			proxies[i].freeze()
		}
	}
	start := time.Now()
	type result struct {
		id  string
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		id, err := c.EnqueueOne(ctx, "frozen", []byte("during"))
		done <- result{id, err}
	}()
	leader.crash() // its Raft falls silent too; the others elect
	r := <-done
	took := time.Since(start)
	if r.err != nil {
		t.Fatalf("enqueue while the leader is frozen: %v (after %v)", r.err, took)
	}
	if limit := client.DefaultAttemptTimeout + 1500*time.Millisecond; took > limit {
		t.Fatalf("enqueue took %v, more than %v: the frozen leader cost more than an attempt and an election", took, limit)
	}
	newLeader := waitLeader(t, nodes)
	t.Logf("enqueue finished %v after the leader froze; new leader %s", took.Round(time.Millisecond), newLeader.id)
	ctx, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if task, err := c.ReadTask(ctx, r.id); err != nil || task.GetId() != r.id {
		t.Fatalf("acknowledged task %s: %v, %v", r.id, task, err)
	}
}
