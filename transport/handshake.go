package transport

import (
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
)

// TLS handshakes are the costliest thing an outsider can start without a
// token: the server's key exchange and signature for each ClientHello:
// 3 x 7,500 handshakes that never finished took the leader's
// cores from Raft and gossip, and it lost its leadership within 3 s.
//
// handshakeCreds bounds the handshakes computing at once to a number of
// slots. A handshake holds a slot only while it computes: from the moment
// bytes from the peer arrive until the server waits on the peer again.
// So a peer that stalls mid-handshake holds no slot while it stalls, and
// a flood of ClientHellos queues for the slots (bounded in number by the
// connection guard, in time by HandshakeTimeout) instead of taking every
// core. Once the handshake ends the connection reads and writes as before.

// handshakeCreds wraps server credentials so that their handshakes take
// turns in slots.
type handshakeCreds struct {
	credentials.TransportCredentials
	slots chan struct{}
	wait  time.Duration
}

func limitHandshakes(creds credentials.TransportCredentials, slots int, wait time.Duration) credentials.TransportCredentials {
	return &handshakeCreds{TransportCredentials: creds, slots: make(chan struct{}, slots), wait: wait}
}

// ServerHandshake runs the wrapped handshake over a connection that takes
// a slot whenever it has read something and gives it back before it waits.
func (h *handshakeCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	hc := &handshakeConn{Conn: raw, h: h}
	conn, info, err := h.TransportCredentials.ServerHandshake(hc)
	hc.finish()
	return conn, info, err
}

func (h *handshakeCreds) Clone() credentials.TransportCredentials {
	return &handshakeCreds{TransportCredentials: h.TransportCredentials.Clone(), slots: h.slots, wait: h.wait}
}

// handshakeConn is the raw connection under TLS. During the handshake only
// the handshake's goroutine uses it; after, done makes it a plain pass-through.
type handshakeConn struct {
	net.Conn
	h    *handshakeCreds
	done atomic.Bool
	held bool // a slot is held; only the handshake's goroutine reads it
}

func (c *handshakeConn) Read(p []byte) (int, error) {
	if c.done.Load() {
		return c.Conn.Read(p)
	}
	c.release() // waiting on the peer costs nothing: give the slot back
	n, err := c.Conn.Read(p)
	if n > 0 {
		if aerr := c.acquire(); aerr != nil {
			return 0, aerr
		}
	}
	return n, err
}

func (c *handshakeConn) acquire() error {
	select {
	case c.h.slots <- struct{}{}:
		c.held = true
		return nil
	default:
	}
	var closing <-chan struct{} // nil: never ready
	if cc, ok := c.Conn.(interface{ closing() <-chan struct{} }); ok {
		closing = cc.closing()
	}
	t := time.NewTimer(c.h.wait)
	defer t.Stop()
	select {
	case c.h.slots <- struct{}{}:
		c.held = true
		return nil
	case <-closing:
		return fmt.Errorf("connection closed while its TLS handshake waited for a slot: %w", net.ErrClosed)
	case <-t.C:
		return fmt.Errorf("%w: no TLS handshake slot in %v", ErrOverloaded, c.h.wait)
	}
}

func (c *handshakeConn) release() {
	if c.held {
		<-c.h.slots
		c.held = false
	}
}

// finish ends the handshake's hold on the connection.
func (c *handshakeConn) finish() {
	c.release()
	c.done.Store(true)
}
