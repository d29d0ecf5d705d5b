package raftlog_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/internal/testwait"
)

// Raft's listener holds at most RaftMaxConns inbound connections: the rest
// of a flood is closed at accept, and the node keeps committing.
func Test_RaftListenerRefusesPastLimit(t *testing.T) {
	cfg := nodetest.Config(t, "n1", 1)
	cfg.RaftMaxConns = 4
	n := nodetest.Start(t, cfg)
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)

	const flood = 12
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for i := 0; i < flood; i++ {
		c, err := net.DialTimeout("tcp", n.Internals().Config.RaftAddr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// Read every connection at once: a refused one ends (EOF), one that
	// Raft holds stays open until the deadline.
	ends := make(chan bool, flood)
	for _, c := range conns {
		go func(c net.Conn) {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			ends <- !(errors.As(err, &ne) && ne.Timeout())
		}(c)
	}
	closed := 0
	for range conns {
		if <-ends {
			closed++
		}
	}
	if closed != flood-cfg.RaftMaxConns {
		t.Fatalf("%d of %d connections were closed, want %d", closed, flood, flood-cfg.RaftMaxConns)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := n.Service().Propose(ctx, nodetest.EnqueueCmd("q", "during the flood")); err != nil {
		t.Fatalf("propose while Raft's listener is full: %v", err)
	}
}
