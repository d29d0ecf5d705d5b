package raftlog

import (
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cluster/peer"
	"github.com/dockethq/docket/internal/connlimit"
)

// tlsStream is Raft's StreamLayer with mutual TLS over the connlimit
// listener: every inbound connection is counted before its handshake, and
// both sides accept only a server certificate of the cluster CA
// (certs.PeerServerConfig, certs.PeerClientConfig).
type tlsStream struct {
	*connlimit.Listener
	advertise net.Addr
	certs     *certs.Reloader
	timeout   time.Duration  // handshake deadline, both ways
	ident     *peer.Identity // refuses a peer of another cluster
}

// Accept hands Raft a connection whose handshake runs on its first read or
// write, in Raft's per-connection goroutine: a handshake in Accept would
// let one silent connection stop every other from being accepted. The
// handshake has a deadline, so a connection that never finishes it fails
// and gives its slot back.
func (s *tlsStream) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cfg := s.certs.PeerServerConfig()
	inner := cfg.GetConfigForClient
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		c, err := inner(hello)
		if err != nil {
			return nil, err
		}
		return s.ident.AcceptConfig(c, hello), nil
	}
	return &handshakeConn{Conn: tls.Server(c, cfg), timeout: s.timeout}, nil
}

// Dial opens an outgoing Raft connection and completes the handshake
// within timeout (Raft's dial timeout, at most the handshake deadline).
func (s *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 || timeout > s.timeout {
		timeout = s.timeout
	}
	d := &net.Dialer{Timeout: timeout}
	c, err := tls.DialWithDialer(d, "tcp", string(addr), s.ident.DialConfig(s.certs.PeerClientConfig()))
	return c, s.ident.DialError(string(addr), err)
}

// Addr is the address other servers reach this one at.
func (s *tlsStream) Addr() net.Addr { return s.advertise }

// handshakeConn is a server-side TLS connection that handshakes, under a
// deadline, before its first read or write.
type handshakeConn struct {
	*tls.Conn
	timeout time.Duration
	once    sync.Once
	err     error
}

func (c *handshakeConn) handshake() error {
	c.once.Do(func() {
		if c.err = c.Conn.SetDeadline(time.Now().Add(c.timeout)); c.err != nil {
			return
		}
		if c.err = c.Conn.Handshake(); c.err != nil {
			return
		}
		// Raft's inbound side sets no deadlines of its own: an idle
		// pooled connection waits for the next RPC indefinitely.
		c.err = c.Conn.SetDeadline(time.Time{})
	})
	return c.err
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *handshakeConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
