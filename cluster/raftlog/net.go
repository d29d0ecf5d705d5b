package raftlog

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
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
type Gate struct {
	*raft.NetworkTransport
	// May is nil when this node may campaign now, else the error its
	// own vote requests fail with.
	May func() error
	// Asked counts the vote requests sent on.
	Asked *atomic.Uint64
}

// RequestVote asks target for a vote when this node may campaign.
func (t *Gate) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := t.May(); err != nil {
		return err
	}
	t.Asked.Add(1)
	return t.NetworkTransport.RequestVote(id, target, args, resp)
}

// RequestPreVote asks target for a pre-vote when this node may campaign.
func (t *Gate) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if err := t.May(); err != nil {
		return err
	}
	t.Asked.Add(1)
	return t.NetworkTransport.RequestPreVote(id, target, args, resp)
}
