package raftlog

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func openLoopback(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	tr, err := OpenTransport(TransportConfig{Addr: "127.0.0.1:0", MaxConns: 16, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// Test_GateCloseWaitsForAHeartbeatInFlight: Raft runs a heartbeat on the
// transport's connection goroutine, not its own, and a heartbeat from a
// newer term writes the term to the stable store. Raft's Shutdown does not
// wait for it, so a node that closed its stores right after Shutdown
// panicked in setCurrentTerm ("database not open"; one CI run of the
// cluster package, and hashicorp/raft#717). The gate's Close returns only
// once a heartbeat in flight has finished, and no heartbeat reaches Raft
// after it.
func Test_GateCloseWaitsForAHeartbeatInFlight(t *testing.T) {
	var asked atomic.Uint64
	g := &Gate{NetworkTransport: openLoopback(t), May: func() error { return nil }, Asked: &asked}
	leader := openLoopback(t)
	t.Cleanup(func() { _ = leader.Close() })

	entered, release := make(chan struct{}, 4), make(chan struct{})
	var calls atomic.Int32
	var finished atomic.Bool // the handler returned: Raft is done with the stores
	g.SetHeartbeatHandler(func(rpc raft.RPC) {
		calls.Add(1)
		entered <- struct{}{}
		<-release
		rpc.Respond(&raft.AppendEntriesResponse{Term: 2, Success: true}, nil)
		finished.Store(true)
	})
	heartbeat := func() error {
		// What raft's heartbeat sends: a term and a leader, nothing else.
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("leader"), Addr: []byte(leader.LocalAddr())}, Term: 2}
		return leader.AppendEntries("follower", g.LocalAddr(), req, &raft.AppendEntriesResponse{})
	}
	sent := make(chan error, 1)
	go func() { sent <- heartbeat() }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat never reached the handler")
	}

	closed := make(chan error, 1)
	go func() { closed <- g.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a heartbeat was still in Raft's hands", err)
	case <-time.After(200 * time.Millisecond): // an absence: nothing to poll for
	}
	close(release)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close never returned after the heartbeat finished")
	}
	if !finished.Load() {
		t.Fatal("Close returned before Raft's handler did")
	}
	// Whether the answer reaches the leader is the transport's race with
	// its own shutdown (its connection goroutine picks between the answer
	// and the shutdown channel): a closing follower's answer may be lost,
	// and either outcome is safe. What matters is that the call ends.
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat in flight never ended")
	}
	if err := heartbeat(); err == nil {
		t.Fatal("a heartbeat after Close was answered")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("Raft's handler ran %d times, want 1", n)
	}
}
