package transport

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"

	"github.com/dockethq/docket/cluster/service"
)

// A connection costs the server from the moment it is accepted: a
// goroutine, a TLS handshake, gRPC's buffers (about 117 KB held per idle
// HTTP/2 connection, measured). Until it carries an authenticated call,
// it is the cheapest thing an outsider can make a node hold: 18,332 TLS
// connections that sent the HTTP/2 preface and nothing else took a
// leader's RSS from 99 MB to 2.37 GB and cost it its leadership.
//
// connGuard therefore keeps apart the connections that have not yet
// proven anything ("unproven") and bounds them on their own, below the
// listener's connection limit:
//
//   - per remote IP: at most MaxUnprovenPerIP at once; past it a new
//     connection from that IP is closed at accept, so one source cannot
//     take the room of everyone else;
//   - in all: at most MaxUnproven at once; past it the oldest unproven
//     connection of the IP holding most of them is closed to make room,
//     so a flood pushes out its own connections, not a client's;
//   - in time: a connection still unproven UnprovenTimeout after accept
//     is closed, whatever it sent;
//   - in calls: the unproven connections of one IP may make
//     UnprovenCallRate calls a second (twice that in a burst); past it a
//     call waits for its turn, and past a few waiting the connection is
//     closed. A refused call still costs the server a call's work, so
//     refusing alone would let a loop of tokenless calls eat the CPU;
//     closing at once would turn the loop into one of handshakes, which
//     cost more.
//
// A connection is proven by a call that authenticates (a valid token, or
// a client certificate of the cluster CA), or by any Docket call when
// auth is off. Calls open without a token (Status, health) do not prove a
// connection: they are what a flood would use to look busy. Proven
// connections leave the guard; the listener's limit, keepalive and
// MaxConnectionIdle bound them as before.

// connGuard tracks unproven connections. Its listener wraps the API's.
type connGuard struct {
	timeout     time.Duration
	maxTotal    int
	maxPerIP    int
	callRate    float64 // calls a second an IP's unproven connections may make
	log         *slog.Logger
	expired     atomic.Uint64
	evicted     atomic.Uint64
	refusedByIP atomic.Uint64
	overCalls   atomic.Uint64

	mu      sync.Mutex
	byAddr  map[string]*guardedConn // remote address -> unproven connection
	ips     map[string]*ipState
	total   int
	admits  int
	lastLog time.Time
}

// ipState is one remote IP's unproven connections, oldest first, and the
// token bucket of the calls they may make without proving themselves.
type ipState struct {
	conns  *list.List // of *guardedConn
	tokens float64
	last   time.Time
}

func newConnGuard(timeout time.Duration, maxTotal, maxPerIP int, callRate float64, log *slog.Logger) *connGuard {
	return &connGuard{timeout: timeout, maxTotal: maxTotal, maxPerIP: maxPerIP, callRate: callRate, log: log,
		byAddr: map[string]*guardedConn{}, ips: map[string]*ipState{}}
}

// guardedConn is an accepted connection; proven once it has carried an
// authenticated call.
type guardedConn struct {
	net.Conn
	g      *connGuard
	addr   string
	ip     string
	proven atomic.Bool
	timer  *time.Timer
	elem   *list.Element // in its IP's list while unproven and open; guarded by g.mu
	once   sync.Once
	done   chan struct{} // closed when the connection is
}

// closing is closed once the connection is: a handshake waiting for a
// slot gives up (handshake.go).
func (gc *guardedConn) closing() <-chan struct{} { return gc.done }

// listener wraps l so that its connections are guarded.
func (g *connGuard) listener(l net.Listener) net.Listener { return &guardListener{Listener: l, g: g} }

type guardListener struct {
	net.Listener
	g *connGuard
}

// Accept returns the next connection the guard lets in; one refused for
// its IP is closed here and Accept waits for the next.
func (l *guardListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if gc := l.g.admit(c); gc != nil {
			return gc, nil
		}
	}
}

// admit registers c as unproven, or closes it when its IP holds
// MaxUnprovenPerIP already. When the total is at its bound, it closes the
// oldest unproven connection of the IP that holds the most, so that a
// flood pushes out its own connections and not a client's.
func (g *connGuard) admit(c net.Conn) *guardedConn {
	addr := c.RemoteAddr().String()
	ip := addr
	if host, _, err := net.SplitHostPort(addr); err == nil {
		ip = host
	}
	gc := &guardedConn{Conn: c, g: g, addr: addr, ip: ip, done: make(chan struct{})}
	var victim *guardedConn
	g.mu.Lock()
	st := g.ips[ip]
	if st != nil && st.conns.Len() >= g.maxPerIP {
		g.mu.Unlock()
		g.refusedByIP.Add(1)
		_ = c.Close() // refused; nothing of it is ours to report
		g.note("unproven connections from one address at their limit: refusing", "from", ip, "limit", g.maxPerIP)
		return nil
	}
	if g.total >= g.maxTotal {
		if v := g.victimLocked(st); v != nil {
			victim = v.conns.Front().Value.(*guardedConn)
			g.forgetLocked(victim)
		}
	}
	if st == nil {
		st = &ipState{conns: list.New(), tokens: 2 * g.callRate, last: time.Now()}
		g.ips[ip] = st
	}
	g.byAddr[addr] = gc
	gc.elem = st.conns.PushBack(gc)
	g.total++
	gc.timer = time.AfterFunc(g.timeout, gc.expire)
	if g.admits++; g.admits%256 == 0 {
		g.sweepLocked()
	}
	g.mu.Unlock()
	if victim != nil {
		g.evicted.Add(1)
		victim.shut() // gRPC sees the connection end and cleans up
		g.note("unproven connections at their limit: closing the oldest of the address holding most", "limit", g.maxTotal,
			"closed", victim.addr)
	}
	return gc
}

// victimLocked is the IP whose oldest unproven connection makes room: the
// newcomer's own when it holds at least an even share, else the IP that
// holds the most. g.mu is held.
func (g *connGuard) victimLocked(own *ipState) *ipState {
	if own != nil && own.conns.Len() > 0 && own.conns.Len()*len(g.ips) >= g.total {
		return own
	}
	var most *ipState
	for _, st := range g.ips {
		if most == nil || st.conns.Len() > most.conns.Len() {
			most = st
		}
	}
	if most == nil || most.conns.Len() == 0 {
		return nil
	}
	return most
}

// sweepLocked drops the state of IPs with no unproven connection whose
// bucket has refilled. g.mu is held.
func (g *connGuard) sweepLocked() {
	now := time.Now()
	for ip, st := range g.ips {
		if st.conns.Len() == 0 && st.tokens+now.Sub(st.last).Seconds()*g.callRate >= 2*g.callRate {
			delete(g.ips, ip)
		}
	}
}

// forgetLocked removes gc from the unproven set. g.mu is held.
func (g *connGuard) forgetLocked(gc *guardedConn) bool {
	if gc.elem == nil {
		return false
	}
	st := g.ips[gc.ip]
	st.conns.Remove(gc.elem)
	gc.elem = nil
	g.total--
	if g.byAddr[gc.addr] == gc {
		delete(g.byAddr, gc.addr)
	}
	gc.timer.Stop()
	return true
}

// callBacklog is how many calls beyond its bucket an IP's unproven
// connections may have waiting for their turn; past it the connection is
// closed.
const callBacklog = 4

// takeCall takes one call from the bucket of gc's IP. A call that finds
// it empty waits for its turn (so a loop of calls is paced at the rate,
// which costs less than closing and a new handshake would), unless
// callBacklog calls wait already: then it answers false.
func (g *connGuard) takeCall(ctx context.Context, gc *guardedConn) bool {
	g.mu.Lock()
	st := g.ips[gc.ip]
	if st == nil {
		g.mu.Unlock()
		return true // proven or closed meanwhile
	}
	now := time.Now()
	st.tokens = min(2*g.callRate, st.tokens+now.Sub(st.last).Seconds()*g.callRate)
	st.last = now
	if st.tokens-1 < -callBacklog {
		g.mu.Unlock()
		return false
	}
	st.tokens-- // below zero: a turn reserved in the future
	wait := time.Duration(-st.tokens / g.callRate * float64(time.Second))
	g.mu.Unlock()
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-gc.done:
	}
	return true
}

// shut closes the connection underneath gRPC, once.
func (gc *guardedConn) shut() {
	gc.once.Do(func() {
		close(gc.done)
		_ = gc.Conn.Close()
	})
}

// expire closes gc if it is still unproven when its time is up.
func (gc *guardedConn) expire() {
	gc.g.mu.Lock()
	was := gc.g.forgetLocked(gc)
	gc.g.mu.Unlock()
	if was {
		gc.g.expired.Add(1)
		gc.shut()
		gc.g.note("connection closed: no authenticated call in time", "from", gc.addr, "after", gc.g.timeout)
	}
}

// Close closes the connection and gives its unproven slot back.
func (gc *guardedConn) Close() error {
	gc.g.mu.Lock()
	gc.g.forgetLocked(gc)
	gc.g.mu.Unlock()
	err := gc.Conn.Close()
	gc.once.Do(func() { close(gc.done) })
	return err
}

// prove takes gc out of the unproven set for good.
func (gc *guardedConn) prove() {
	if gc.proven.Swap(true) {
		return
	}
	gc.g.mu.Lock()
	gc.g.forgetLocked(gc)
	gc.g.mu.Unlock()
}

// unproven is how many connections are unproven now.
func (g *connGuard) unproven() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.total
}

// note logs a guard event at most once a second: a flood must not also
// flood the log.
func (g *connGuard) note(msg string, args ...any) {
	g.mu.Lock()
	now := time.Now()
	if now.Sub(g.lastLog) < time.Second {
		g.mu.Unlock()
		return
	}
	g.lastLog = now
	g.mu.Unlock()
	g.log.Warn(msg, append(args, "expired_total", g.expired.Load(), "evicted_total", g.evicted.Load(),
		"refused_by_ip_total", g.refusedByIP.Load(), "over_call_rate_total", g.overCalls.Load())...)
}

// register exports the guard's counts as docket_transport_unproven_*.
func (g *connGuard) register(reg prometheus.Registerer, log *slog.Logger) {
	if reg == nil {
		return
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "docket", Subsystem: "transport", Name: "unproven_connections",
			Help: "Client connections that have made no authenticated call yet."}, func() float64 { return float64(g.unproven()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "docket", Subsystem: "transport", Name: "unproven_expired_total",
			Help: "Connections closed for making no authenticated call in time."}, func() float64 { return float64(g.expired.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "docket", Subsystem: "transport", Name: "unproven_evicted_total",
			Help: "Unproven connections closed to make room for a new one."}, func() float64 { return float64(g.evicted.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "docket", Subsystem: "transport", Name: "unproven_refused_total",
			Help: "Connections closed at accept: their IP held its share of unproven connections."}, func() float64 { return float64(g.refusedByIP.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "docket", Subsystem: "transport", Name: "unproven_over_rate_total",
			Help: "Connections closed for calls without a token over the rate."}, func() float64 { return float64(g.overCalls.Load()) }),
	} {
		if err := reg.Register(c); err != nil {
			log.Warn("transport metric not registered", "err", err) // a second Server on one registry
		}
	}
}

// guardConnKey carries a connection's *guardedConn in its context, and so
// in the context of each of its calls.
type guardConnKey struct{}

// TagConn finds the guarded connection gRPC just set up, by its remote
// address, and puts it in the connection's context.
func (g *connGuard) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if info.RemoteAddr == nil {
		return ctx
	}
	g.mu.Lock()
	gc := g.byAddr[info.RemoteAddr.String()]
	g.mu.Unlock()
	if gc == nil {
		return ctx
	}
	return context.WithValue(ctx, guardConnKey{}, gc)
}

func (g *connGuard) HandleConn(context.Context, stats.ConnStats) {}
func (g *connGuard) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return ctx
}
func (g *connGuard) HandleRPC(context.Context, stats.RPCStats) {}

// noteCall proves the call's connection when the call authenticated: a
// token was checked (tok), auth is off, or the peer showed a client
// certificate of the cluster CA. A token the interceptor did not check
// (an open call: Status, health) is checked here, once per connection; a
// failing one proves nothing and is not refused for it. authErr is what
// the interceptor answers so far: PermissionDenied still means a valid
// token. A call that leaves its connection unproven, refused or not,
// takes its turn in its IP's bucket (UnprovenCallRate, takeCall); past
// the backlog the connection is closed and the call refused with
// ErrOverloaded: refusing alone would still cost a call's work per call.
func (s *Server) noteCall(ctx context.Context, method string, authErr error) error {
	gc, _ := ctx.Value(guardConnKey{}).(*guardedConn)
	if gc == nil || gc.proven.Load() {
		return nil
	}
	switch {
	case !s.cfg.Auth && docketMethod(method), tokenOf(ctx) != nil, verifiedPeer(ctx),
		errors.Is(authErr, service.ErrPermissionDenied):
		gc.prove()
		return nil
	case authErr == nil && bearer(ctx) != "":
		if _, err := s.svc.Authenticate(bearer(ctx)); err == nil {
			gc.prove()
			return nil
		}
	}
	if gc.g.takeCall(ctx, gc) {
		return nil
	}
	gc.g.overCalls.Add(1)
	gc.shut()
	gc.g.note("connection closed: calls without a token over the rate", "from", gc.addr, "rate", gc.g.callRate)
	return fmt.Errorf("%w: calls without a token from %s over %v a second", ErrOverloaded, gc.ip, gc.g.callRate)
}

// verifiedPeer reports whether the call's TLS peer gave a certificate that
// verified against the cluster CA.
func verifiedPeer(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	return ok && len(info.State.VerifiedChains) > 0
}
