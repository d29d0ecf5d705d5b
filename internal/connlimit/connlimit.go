// Package connlimit bounds how many connections a listener holds open at
// once. Every accepted connection is a file descriptor, and a process that
// runs out of them cannot open its own files: tens of thousands of idle
// HTTP/2 connections can leave a store unable to open a file it needs, and
// a server that cannot write dies. A server wraps each listener it serves
// in a Listener whose limit is its share of the file limit minus a reserve
// kept for its stores.
//
// # Decisions and trade-offs
//
//   - Refuse at accept, do not wait: a connection past the limit is accepted
//     and closed at once, so its caller sees the connection end rather than
//     hang in the kernel's backlog, and a client can try another node. The
//     netutil.LimitListener way, blocking Accept until a slot frees, leaves
//     callers waiting with no answer.
//   - Count, do not measure: the listener compares its own count of open
//     connections with its limit, not the process's open files
//     (/proc/self/fd), which would cost a directory read per accept. The
//     reserve for everything else is set once, at start, by the caller.
//   - Refusals are logged at most once a second, with how many were refused
//     since: a flood must not also flood the log.
//   - The wrapped connection is no longer a *net.TCPConn, so gRPC cannot set
//     TCP_USER_TIMEOUT on it; its keepalive pings still find dead peers.
//   - The package sits under cluster, the lowest room with a listener, so
//     that cluster (Raft) and the binary (gRPC) share one implementation.
package connlimit

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// logEvery spaces out the log lines about refused connections.
const logEvery = time.Second

// Listener is a net.Listener that holds at most its limit of accepted
// connections open at once. A connection accepted past the limit is closed
// at once and Accept waits for the next one; closing an accepted
// connection frees its slot.
type Listener struct {
	net.Listener
	name    string
	max     int64
	log     *slog.Logger
	open    atomic.Int64
	refused atomic.Uint64

	logMu      sync.Mutex
	lastLog    time.Time
	sinceLog   uint64
	loggedOnce bool
}

// New wraps l so that at most max of its connections are open at once.
// name says which listener it is in logs ("grpc", "raft"); log may be nil.
func New(l net.Listener, max int, name string, log *slog.Logger) *Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Listener{Listener: l, name: name, max: int64(max), log: log}
}

// Accept returns the next connection within the limit. Errors are the
// wrapped listener's.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &conn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refused.Add(1)
		_ = c.Close() // refused; nothing of it is ours to report
		l.noteRefusal(c.RemoteAddr())
	}
}

// Limit is the most connections held open at once.
func (l *Listener) Limit() int { return int(l.max) }

// Open is how many accepted connections are open now.
func (l *Listener) Open() int { return int(l.open.Load()) }

// Refused is how many connections were closed at accept since the start.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

func (l *Listener) noteRefusal(from net.Addr) {
	l.logMu.Lock()
	defer l.logMu.Unlock()
	l.sinceLog++
	now := time.Now()
	if l.loggedOnce && now.Sub(l.lastLog) < logEvery {
		return
	}
	l.log.Warn("connection limit reached: refusing connections", "listener", l.name,
		"limit", l.max, "refused", l.sinceLog, "refused_total", l.refused.Load(), "last_from", from.String())
	l.lastLog, l.sinceLog, l.loggedOnce = now, 0, true
}

// conn gives its slot back when it is closed, once however often Close is
// called.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
