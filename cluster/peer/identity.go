package peer

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// ErrOtherCluster means a peer belongs to another cluster: its cluster id
// differs from this node's. The node refuses it on Raft, gossip and
// forwarded calls alike.
var ErrOtherCluster = errors.New("peer belongs to another cluster")

// raftALPNPrefix names a Raft connection's TLS application protocol:
// "docket-raft/<cluster id>". Carrying the id in ALPN checks it inside
// the handshake without changing the bytes Raft sends, so builds that
// offer no ALPN (before feature level 14) still talk to this one.
const raftALPNPrefix = "docket-raft/"

// Identity answers which cluster this node belongs to, and refuses peers
// of another. The id comes from the FSM (SetClusterID), so every replica
// holds the same one and a node that has not caught up yet has none: such
// a node accepts any peer of the cluster CA, as a node of a build without
// ids does, and learns the id from the log it is sent.
type Identity struct {
	id      func() string
	log     *slog.Logger
	refused atomic.Uint64 // peers refused for naming another cluster

	mu     sync.Mutex
	logged map[string]time.Time // another cluster's id -> when its refusal was last logged
}

// refusalLogEvery bounds the refusal log lines per other cluster: Raft
// redials a refused peer many times a second.
const refusalLogEvery = time.Minute

// Refused counts the peers refused for naming another cluster.
func (c *Identity) Refused() uint64 { return c.refused.Load() }

// ID is this node's cluster id, "" while it has none.
func (c *Identity) ID() string {
	if c == nil || c.id == nil {
		return ""
	}
	return c.id()
}

// Check refuses a peer that named another cluster; "" on either side
// passes.
func (c *Identity) Check(kind, peer, theirs string) error {
	mine := c.ID()
	if mine == "" || theirs == "" || mine == theirs {
		return nil
	}
	c.refused.Add(1)
	if c.shouldLog(theirs) {
		c.log.Error("refusing a peer of another cluster", "via", kind, "peer", peer,
			"this_cluster", mine, "peer_cluster", theirs, "refused_so_far", c.refused.Load())
	}
	return fmt.Errorf("%w: %s peer %s is in cluster %s, this node in cluster %s", ErrOtherCluster, kind, peer, theirs, mine)
}

// shouldLog reports whether a refusal of cluster theirs is logged now: the
// first, then at most one a refusalLogEvery.
func (c *Identity) shouldLog(theirs string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if last, ok := c.logged[theirs]; ok && now.Sub(last) < refusalLogEvery {
		return false
	}
	if c.logged == nil {
		c.logged = map[string]time.Time{}
	}
	if len(c.logged) > 64 { // bounded: an outsider can name any id
		clear(c.logged)
	}
	c.logged[theirs] = now
	return true
}

// DialConfig adds this node's id to an outgoing Raft handshake.
func (c *Identity) DialConfig(base *tls.Config) *tls.Config {
	if id := c.ID(); id != "" {
		base.NextProtos = []string{raftALPNPrefix + id}
	}
	return base
}

// AcceptConfig checks the id a dialling peer offered. A peer of another
// cluster is sent this node's id as the only protocol it speaks, so the
// handshake fails with no_application_protocol on both ends and the
// dialler learns why; a peer that offered no id is accepted.
func (c *Identity) AcceptConfig(cfg *tls.Config, hello *tls.ClientHelloInfo) *tls.Config {
	mine := c.ID()
	if mine == "" {
		return cfg
	}
	for _, p := range hello.SupportedProtos {
		theirs, ok := strings.CutPrefix(p, raftALPNPrefix)
		if !ok {
			continue
		}
		peer := ""
		if hello.Conn != nil {
			peer = hello.Conn.RemoteAddr().String()
		}
		_ = c.Check("raft", peer, theirs) // logged; the handshake fails below
		break
	}
	cfg.NextProtos = []string{raftALPNPrefix + mine}
	return cfg
}

// DialError names the likely cause of a handshake the peer ended with
// no_application_protocol: only another cluster's node does that.
func (c *Identity) DialError(addr string, err error) error {
	if err != nil && strings.Contains(err.Error(), "no application protocol") {
		return fmt.Errorf("%w: raft peer %s refused cluster id %s (its log names its own): %w", ErrOtherCluster, addr, c.ID(), err)
	}
	return err
}

// NewClusterID mints a cluster id: 128 random bits in hex.
func NewClusterID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cluster id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// UnaryClient stamps this node's cluster id on a call to another node.
func (c *Identity) UnaryClient(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if id := c.ID(); id != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, pb.MetadataCluster, id)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// NewIdentity is the check of a node whose cluster id is id(), logging
// its refusals to log.
func NewIdentity(id func() string, log *slog.Logger) *Identity {
	return &Identity{id: id, log: log}
}
