package raftlog

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cluster/peer"
	"github.com/dockethq/docket/internal/connlimit"
)

// TransportConfig is what OpenTransport needs.
type TransportConfig struct {
	// Addr is the address to bind; port 0 (tests, benchmarks) advertises
	// what was bound.
	Addr string
	// MaxConns bounds inbound connections.
	MaxConns int
	// TLS, when set, makes the stream mutual TLS with the cluster CA.
	TLS *certs.Reloader
	// HandshakeTimeout bounds a TLS handshake, both ways.
	HandshakeTimeout time.Duration
	// Ident refuses a peer of another cluster; nil accepts any.
	Ident *peer.Identity
	Log   *slog.Logger
}

// Open binds cfg.Addr and returns Raft's transport over it. Inbound
// connections are limited to cfg.MaxConns (limitedStream), so a flood of
// connections to the Raft port cannot take the descriptors the stores
// need. With cfg.TLS the same listener carries mutual TLS (tlsStream).
func OpenTransport(cfg TransportConfig) (*raft.NetworkTransport, error) {
	addr, err := net.ResolveTCPAddr("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("raft address %s: %w", cfg.Addr, err)
	}
	lis, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("raft listen %s: %w", cfg.Addr, err)
	}
	var advertise net.Addr = addr
	if addr.Port == 0 {
		advertise = lis.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		return nil, errors.Join(fmt.Errorf("raft address %s: not advertisable, bind a specific address", cfg.Addr), lis.Close())
	}
	limited := connlimit.New(lis, cfg.MaxConns, "raft", cfg.Log)
	var stream raft.StreamLayer = &limitedStream{Listener: limited, advertise: advertise}
	if cfg.TLS != nil {
		stream = &tlsStream{Listener: limited, advertise: advertise, certs: cfg.TLS, timeout: cfg.HandshakeTimeout, ident: cfg.Ident}
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: raftMaxPool, Timeout: raftIOTimeout, Logger: NewHCLog(cfg.Log, "raft"),
		MaxRPCsInFlight: raftMaxRPCsInFlight,
	}), nil
}

// Raft's NetworkTransport settings, as raft.NewTCPTransport was given them,
// but without pipelined replication.
const (
	raftMaxPool   = 5 // pooled outgoing connections per peer
	raftIOTimeout = 10 * time.Second
	// raftMaxRPCsInFlight 1 turns raft's pipelined replication off. With
	// its default of 2 the pipeline's channels are unbuffered, and a
	// follower's failed append (Success=false) or a replication stop while
	// a response is being decoded leaves the decoder blocked handing it on
	// and the next send blocked handing over: the leader never replicates
	// to that follower again while heartbeats keep it from an election,
	// and the leader's Shutdown waits for that goroutine forever (a CI run
	// hung 20 minutes in two tests; grafana/pyroscope#5518 traced the same
	// deadlock). hashicorp/raft documents pipelining as of little benefit
	// with batching (raft#541); BENCHMARKS.md has the before and after.
	raftMaxRPCsInFlight = 1
)

// limitedStream is raft.TCPStreamLayer over a connlimit.Listener.
type limitedStream struct {
	*connlimit.Listener
	advertise net.Addr
}

// Dial opens an outgoing Raft connection. Outgoing connections are not
// counted: there are at most raftMaxPool per peer (plus a pipeline and a
// snapshot), and they come out of the file descriptors' reserve.
func (s *limitedStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

// Addr is the address other servers reach this one at.
func (s *limitedStream) Addr() net.Addr { return s.advertise }

// Gate is Raft's transport with vote requests held back while
// this node may not campaign (cluster.Node.mayCampaign). A node restarted on a
// damaged keyspace (a MANIFEST Pebble opens without error) was elected
// leader before any check ran on it; it served nothing, but a node that
// has not passed a check should not lead while a checked one can.
// Everything else, AppendEntries and the votes it grants others included,
// passes through.
//
// It also fences Raft's heartbeat handler at Close. Raft runs a heartbeat
// on the transport's connection goroutine, and one from a newer term
// writes the term to the stable store; Raft's Shutdown does not wait for
// it, so the stores closed after Shutdown could be written by it, and
// Raft panics on that failed write (hashicorp/raft#717). Close waits for a
// heartbeat in flight and refuses those after it; the node closes the
// gate before its stores.
type Gate struct {
	*raft.NetworkTransport
	// May is nil when this node may campaign now, else the error its
	// own vote requests fail with. A nil May lets every request through.
	May func() error
	// Asked counts the vote requests sent on, when set.
	Asked *atomic.Uint64

	// beats is held shared by each heartbeat Raft handles and
	// exclusively by Close, which sets closed.
	beats  sync.RWMutex
	closed bool
}

// may is nil when a vote request may go out, and counts it.
func (t *Gate) may() error {
	if t.May != nil {
		if err := t.May(); err != nil {
			return err
		}
	}
	if t.Asked != nil {
		t.Asked.Add(1)
	}
	return nil
}

// SetHeartbeatHandler installs Raft's heartbeat handler behind the fence.
func (t *Gate) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	if cb == nil {
		t.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	t.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		t.beats.RLock()
		defer t.beats.RUnlock()
		if t.closed {
			rpc.Respond(nil, raft.ErrTransportShutdown)
			return
		}
		cb(rpc)
	})
}

// Close waits for a heartbeat Raft is handling, refuses any later one,
// then closes the transport.
func (t *Gate) Close() error {
	t.beats.Lock()
	t.closed = true
	t.beats.Unlock()
	return t.NetworkTransport.Close()
}

// RequestVote asks target for a vote when this node may campaign.
func (t *Gate) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := t.may(); err != nil {
		return err
	}
	return t.NetworkTransport.RequestVote(id, target, args, resp)
}

// RequestPreVote asks target for a pre-vote when this node may campaign.
func (t *Gate) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if err := t.may(); err != nil {
		return err
	}
	return t.NetworkTransport.RequestPreVote(id, target, args, resp)
}
