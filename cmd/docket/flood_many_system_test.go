//go:build system

package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dockethq/docket/internal/testwait"
	"github.com/dockethq/docket/transport"
)

const (
	// manySources is how many loopback addresses the flood comes from
	// (127.0.2.1 and up), and manyPerSource how many idle connections
	// each opens: under the per-address bound (128), so only the global
	// one (1,024) can hold the flood.
	manySources   = 32
	manyPerSource = 50
)

// Test_System_UnprovenCapManyAddresses: idle connections from many
// loopback addresses, each under the per-address bound, together past
// the global bound of unproven connections. The leader holds no more
// than the global bound at once (the rest are closed as they come), keeps
// its leadership and term, and a fresh client from the clients' own
// address connects and writes meanwhile.
func Test_System_UnprovenCapManyAddresses(t *testing.T) {
	// Unproven connections are not closed for their age during the test:
	// only the bound closes them.
	nodes := startClusterAPI(t, 3, nil, transport.Config{UnprovenTimeout: 5 * time.Minute})
	leader := waitLeader(t, nodes)
	term := leader.node.Status().GetTerm()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var (
		mu     sync.Mutex
		conns  []net.Conn
		wg     sync.WaitGroup
		closed atomic.Int64
	)
	t.Cleanup(func() {
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	total := manySources * manyPerSource
	for i := range total {
		ip := net.IPv4(127, 0, 2, byte(1+i%manySources))
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 5 * time.Second}
		c, err := d.DialContext(ctx, "tcp", leader.grpcAddr)
		if err != nil {
			t.Fatalf("connection %d from %s: %v", i, ip, err)
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		// Each reader ends when its connection closes: the server's
		// close (counted) or the test's at the end.
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [64]byte
			for {
				if _, err := c.Read(b[:]); err != nil {
					closed.Add(1)
					return
				}
			}
		}()
	}
	bound := transport.DefaultMaxUnproven
	// Well inside any timeout of an idle connection (gRPC's preface wait,
	// the unproven timeout): only the bound may have closed them.
	testwait.For(t, 5*time.Second, fmt.Sprintf("the leader to hold at most %d of %d", bound, total), func() bool {
		return total-int(closed.Load()) <= bound
	})
	// The bound holds, not just once: nothing more is closed, nothing
	// reopens.
	holdsFor(t, time.Second, func() {
		if open := total - int(closed.Load()); open > bound || open < bound-manySources {
			t.Fatalf("%d of %d flood connections open, want the bound %d", open, total, bound)
		}
	})
	t.Logf("%d connections from %d addresses: %d held, %d closed by the bound", total, manySources, total-int(closed.Load()), closed.Load())

	// A fresh client from 127.0.0.1 gets in and writes.
	start := time.Now()
	c := mustClient(t, leader.grpcAddr)
	for i := range 20 {
		if _, err := c.EnqueueOne(ctx, "legit", fmt.Appendf(nil, "task %d", i)); err != nil {
			t.Fatalf("enqueue %d during the flood: %v", i, err)
		}
	}
	t.Logf("a fresh client connected and wrote 20 tasks in %v", time.Since(start).Round(time.Millisecond))
	if now := waitLeader(t, nodes); now != leader || now.node.Status().GetTerm() != term {
		t.Fatalf("leader %s term %d after the flood, was %s term %d", now.id, now.node.Status().GetTerm(), leader.id, term)
	}
}
