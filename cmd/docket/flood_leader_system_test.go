//go:build system

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cmd/docket/localcluster"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/transport"
)

// The floods, each against the leader of a secure (TLS and
// tokens) 3-node cluster of real agents: idle TCP connections, TLS
// handshakes that never finish, TLS + HTTP/2 preface then idle, and
// Status with the keyspace hash without a token. For each flood the leader
// must keep its leadership (same node, same term), a client's enqueues
// must keep a p99 under 100 ms, fresh clients must get in, and the
// leader's RSS must stay under 512 MiB and come back down afterwards.
//
// The counts are sized for a 2-core CI box that also runs the three
// agents and this test: enough that every connection would cost what the
// issue measured (about 117 KB held, a handshake's crypto each), while the
// assertions, not the raw counts, carry the test. Each flood lasts
// floodPhase and every connection it opened is closed at its end.
const (
	floodPhase       = 18 * time.Second
	floodIdleTCP     = 2000
	floodStalledTLS  = 1500 // connections at once, each replaced twice: 4,500 handshakes
	floodPrefaceIdle = 1200
	floodHashLoops   = 16
	// floodOpenRate paces the opening of idle connections: the flood's
	// own side (TLS handshakes, under the race detector) shares the two
	// cores with the nodes, and an attacker's CPU is not what is measured.
	floodOpenRate = 300

	// floodSources is how many loopback addresses (127.0.1.1 and up) the
	// floods come from, the legitimate client staying on 127.0.0.1: a
	// flood from the clients' own address would meet the per-address
	// bound on unproven connections before anything else.
	floodSources = 32

	floodP99       = 100 * time.Millisecond
	floodRSSLimit  = 512 << 20
	floodRSSSettle = 45 * time.Second
	// floodRSSSlack is how far above its RSS before a flood the leader may
	// stay once the flood is gone: the Go runtime returns freed pages to
	// the kernel gradually, not at once.
	floodRSSSlack = 64 << 20
)

func Test_System_FloodsKeepTheLeader(t *testing.T) {
	bin := buildDocket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, _, err := localcluster.Start(ctx, localcluster.Options{Exe: bin, TempName: "docket-flood-", BasePort: freeBase(t, 3),
		Nodes: 3, TLS: true, Auth: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	c := mustClientWith(t, cl.Addrs(), cl.ClientOptions()...)
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader := cl.ByAddr(st.GetLeaderGrpcAddr())
	if leader == nil {
		t.Fatalf("leader %q is none of %v", st.GetLeaderGrpcAddr(), cl.Addrs())
	}
	t.Logf("leader %s at %s, term %d", leader.ID, leader.GRPC, st.GetTerm())

	hello := clientHello(t)
	for _, f := range []struct {
		name   string
		capped bool
		flood  func(ctx context.Context, addr string) (held func() int, closeAll func())
	}{
		{"idle TCP", true, func(ctx context.Context, addr string) (func() int, func()) {
			return openFlood(ctx, t, addr, floodIdleTCP, func(net.Conn) error { return nil })
		}},
		{"stalled TLS handshakes", false, func(ctx context.Context, addr string) (func() int, func()) {
			// The ClientHello, then silence: the server does its share of
			// the handshake and waits for a Finished that never comes.
			// A connection the server drops is replaced, twice: three
			// waves, as in the issue (3 x 7,500 there, from one address).
			return churnFlood(ctx, t, addr, floodStalledTLS, func(cn net.Conn) error {
				_, err := cn.Write(hello)
				return err
			})
		}},
		{"TLS + HTTP/2 preface, then idle", true, func(ctx context.Context, addr string) (func() int, func()) {
			return openFlood(ctx, t, addr, floodPrefaceIdle, func(cn net.Conn) error {
				tc := tls.Client(cn, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
				if err := tc.HandshakeContext(ctx); err != nil {
					return err
				}
				_, err := tc.Write(http2Hello)
				return err
			})
		}},
		{"Status with hash, no token", false, func(ctx context.Context, addr string) (func() int, func()) {
			return hashLoops(ctx, t, addr, cl.Token)
		}},
	} {
		t.Run(f.name, func(t *testing.T) {
			runFlood(ctx, t, cl, c, leader, f.capped, f.flood)
		})
	}
}

// floodReport is what one flood did to the leader and to a client.
type floodReport struct {
	enqueues, failed  int
	p50, p99, worst   time.Duration
	fresh, freshFail  int
	freshWorst        time.Duration
	rssBefore, rssMax int64
	rssAfter          int64
	heldMax           int
}

// runFlood runs flood against the leader for floodPhase while a client
// works, and checks what the issue asks. capped: the flood's connections
// are idle ones that the leader must hold at most DefaultMaxUnproven of.
func runFlood(ctx context.Context, t *testing.T, cl *localcluster.Cluster, c *client.Client, leader *localcluster.Node,
	capped bool, flood func(ctx context.Context, addr string) (func() int, func())) {
	before := leaderView(ctx, t, c, leader)
	var r floodReport
	var err error
	if r.rssBefore, err = leader.RSSBytes(); err != nil {
		t.Fatal(err)
	}
	fctx, stopFlood := context.WithTimeout(ctx, floodPhase)
	defer stopFlood()

	// The legitimate side: enqueues on the client made before the flood,
	// every 20 ms, and a fresh client every second.
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		lat       []time.Duration
		firstErrs []error
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 10000; i++ { // bounded; the phase ends first
			select {
			case <-fctx.Done():
				return
			case <-tick.C:
			}
			ectx, cancel := context.WithTimeout(ctx, 2*time.Second)
			start := time.Now()
			_, err := c.EnqueueOne(ectx, "flood", []byte("x"))
			d := time.Since(start)
			cancel()
			mu.Lock()
			r.enqueues++
			lat = append(lat, d)
			if err != nil {
				r.failed++
				if len(firstErrs) < 3 {
					firstErrs = append(firstErrs, fmt.Errorf("enqueue at %s: %w", time.Now().Format("15:04:05.000"), err))
				}
			}
			mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 1000; i++ {
			select {
			case <-fctx.Done():
				return
			case <-time.After(time.Second):
			}
			fresh := func() error {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				nc, err := client.New(cctx, []string{leader.GRPC}, cl.ClientOptions()...)
				if err != nil {
					return err
				}
				_, err = nc.EnqueueOne(cctx, "fresh", []byte("x"))
				return errors.Join(err, nc.Close())
			}
			start := time.Now()
			err := fresh()
			d := time.Since(start)
			mu.Lock()
			r.fresh++
			r.freshWorst = max(r.freshWorst, d)
			if err != nil {
				r.freshFail++
				if len(firstErrs) < 3 {
					firstErrs = append(firstErrs, fmt.Errorf("fresh client at %s: %w", time.Now().Format("15:04:05.000"), err))
				}
			}
			mu.Unlock()
		}
	}()

	held, closeAll := flood(fctx, leader.GRPC)
	for fctx.Err() == nil {
		if gone, _ := leader.Exited(); gone {
			break
		}
		if rss, err := leader.RSSBytes(); err == nil {
			r.rssMax = max(r.rssMax, rss)
		}
		r.heldMax = max(r.heldMax, held())
		select {
		case <-fctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	closeAll()
	wg.Wait()
	if gone, err := leader.Exited(); gone {
		t.Fatalf("the leader's process ended during the flood (%v); log tail:\n%s", err, tail(leader.LogPath, 60))
	}

	// Memory comes back once the flood is gone.
	// Poll up to floodRSSSettle; the assertion below judges what it reached.
	deadline := time.Now().Add(floodRSSSettle)
	tick := time.NewTicker(500 * time.Millisecond)
	for {
		if r.rssAfter, err = leader.RSSBytes(); err != nil {
			t.Fatal(err)
		}
		if r.rssAfter <= r.rssBefore+floodRSSSlack || time.Now().After(deadline) {
			break
		}
		<-tick.C
	}
	tick.Stop()
	after := leaderView(ctx, t, c, leader)
	defer func() {
		if t.Failed() {
			t.Logf("leader log tail:\n%s", tail(leader.LogPath, 40))
		}
	}()

	slices.Sort(lat)
	if n := len(lat); n > 0 {
		r.p50, r.p99, r.worst = lat[n/2], lat[(n*99)/100], lat[n-1]
	}
	t.Logf("held at most %d flood connections; %d enqueues (%d failed) p50 %v p99 %v worst %v; %d fresh clients (%d failed, worst %v); leader RSS %d MiB before, %d MiB at most, %d MiB after",
		r.heldMax, r.enqueues, r.failed, r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.worst.Round(time.Millisecond),
		r.fresh, r.freshFail, r.freshWorst.Round(time.Millisecond), r.rssBefore>>20, r.rssMax>>20, r.rssAfter>>20)
	if after.GetState() != "Leader" || after.GetTerm() != before.GetTerm() {
		t.Errorf("the leader lost its leadership: before %s in term %d, after %s in term %d (leader now %s)",
			before.GetState(), before.GetTerm(), after.GetState(), after.GetTerm(), after.GetLeaderId())
	}
	if r.failed > 0 || r.freshFail > 0 {
		t.Errorf("legitimate calls failed: %d enqueues, %d fresh clients; first: %v", r.failed, r.freshFail, firstErrs)
	}
	if r.enqueues < int(floodPhase/time.Second)*10 {
		t.Errorf("only %d enqueues in %v", r.enqueues, floodPhase)
	}
	if r.p99 > floodP99 {
		t.Errorf("enqueue p99 %v, want under %v", r.p99, floodP99)
	}
	// Connections that made no authenticated call are held at most
	// transport.DefaultMaxUnproven at once, whatever the flood opens (a
	// few more may be open from the flood's side while being closed).
	if capped && r.heldMax > transport.DefaultMaxUnproven+64 {
		t.Errorf("the leader held %d flood connections, want at most about %d", r.heldMax, transport.DefaultMaxUnproven)
	}
	if r.rssMax > floodRSSLimit {
		t.Errorf("leader RSS reached %d MiB, want under %d MiB", r.rssMax>>20, floodRSSLimit>>20)
	}
	if r.rssAfter > r.rssBefore+floodRSSSlack {
		t.Errorf("leader RSS %d MiB %v after the flood, %d MiB before: not released", r.rssAfter>>20, floodRSSSettle, r.rssBefore>>20)
	}
}

// leaderView is the leader node's own Status.
func leaderView(ctx context.Context, t *testing.T, c *client.Client, leader *localcluster.Node) *pb.StatusResponse {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.NodeStatus(sctx, leader.GRPC, false)
	if err != nil {
		t.Fatalf("status of %s: %v", leader.ID, err)
	}
	return st
}

// floodDialer dials from the i-th of the flood's source addresses.
func floodDialer(i int) *net.Dialer {
	ip := net.IPv4(127, 0, 1, byte(1+i%floodSources))
	return &net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: ip}}
}

// http2Hello is the HTTP/2 client preface and an empty SETTINGS frame.
var http2Hello = append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 0x4, 0, 0, 0, 0, 0)

// openFlood opens up to n connections to addr, 32 at a time, runs hello
// on each and keeps them open, idle, until closeAll. held counts those
// still open from the flood's side (the server may close them).
func openFlood(ctx context.Context, t *testing.T, addr string, n int, hello func(net.Conn) error) (held func() int, closeAll func()) {
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
		next  atomic.Int64
		fails atomic.Int64
		last  atomic.Int64 // unix nanoseconds of the last connection opened
	)
	// Paced, so that the flood's own side (handshakes, on the same two
	// cores) does not starve the nodes more than the connections do.
	pace := time.NewTicker(time.Second / floodOpenRate)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n) && ctx.Err() == nil; i = next.Add(1) {
				select {
				case <-pace.C:
				case <-ctx.Done():
					return
				}
				d := floodDialer(int(i))
				cn, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					fails.Add(1)
					continue
				}
				_ = cn.SetDeadline(time.Now().Add(5 * time.Second))
				if err := hello(cn); err != nil {
					fails.Add(1)
					_ = cn.Close()
					continue
				}
				_ = cn.SetDeadline(time.Time{})
				last.Store(time.Now().UnixNano())
				mu.Lock()
				conns = append(conns, cn)
				mu.Unlock()
			}
		}()
	}
	open := watchClosed(&mu, &conns)
	return open, func() {
		wg.Wait()
		pace.Stop()
		still := open()
		mu.Lock()
		defer mu.Unlock()
		t.Logf("flood opened %d connections (%d failed to open); %d still open at the end", len(conns), fails.Load(), still)
		// A connection that made no authenticated call is closed
		// transport.DefaultUnprovenTimeout after it was accepted.
		if idle := time.Since(time.Unix(0, last.Load())); idle > transport.DefaultUnprovenTimeout+time.Second && still > 0 {
			t.Errorf("%d flood connections still open %v after the last was opened", still, idle.Round(time.Millisecond))
		}
		for _, cn := range conns {
			_ = cn.Close()
		}
	}
}

// churnFlood is openFlood that keeps n connections in flight: each one
// the server closes is replaced at once, twice at most.
func churnFlood(ctx context.Context, t *testing.T, addr string, n int, hello func(net.Conn) error) (held func() int, closeAll func()) {
	var (
		wg              sync.WaitGroup
		opened, dropped atomic.Int64
		live            atomic.Int64
	)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3 && ctx.Err() == nil; i++ {
				d := floodDialer(w + i)
				cn, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					continue
				}
				opened.Add(1)
				if hello(cn) == nil {
					live.Add(1)
					stop := context.AfterFunc(ctx, func() { _ = cn.SetReadDeadline(time.Now()) })
					_, _ = io.Copy(io.Discard, cn) // until the server closes it or ctx ends
					stop()
					live.Add(-1)
				}
				_ = cn.Close()
				if ctx.Err() == nil {
					dropped.Add(1)
				}
			}
		}()
	}
	return func() int { return int(live.Load()) }, func() {
		wg.Wait()
		t.Logf("flood opened %d connections; the server closed %d during the flood", opened.Load(), dropped.Load())
	}
}

// watchClosed returns how many of conns are still open from the flood's
// side (peerClosed).
func watchClosed(mu *sync.Mutex, conns *[]net.Conn) func() int {
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		open := 0
		for _, cn := range *conns {
			if !peerClosed(cn) {
				open++
			}
		}
		return open
	}
}

// peerClosed reports whether the server closed cn: a read that does not
// wait finds the end of the stream or a reset, after what the server sent
// (read and dropped). A read deadline cannot tell: Go answers a deadline
// already past without reading at all.
func peerClosed(cn net.Conn) bool {
	sc, ok := cn.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	buf := make([]byte, 4096)
	err = raw.Read(func(fd uintptr) bool {
		for i := 0; i < 64; i++ { // bounded: the server sends a few records
			n, _, err := syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
			switch {
			case errors.Is(err, syscall.EAGAIN):
				return true
			case err != nil || n == 0:
				closed = true
				return true
			}
		}
		return true
	})
	return closed || err != nil
}

// hashLoops runs floodHashLoops loops, each on its own TLS connection,
// that call Status with the hash and no token as fast as they are
// answered.
func hashLoops(ctx context.Context, t *testing.T, addr, adminToken string) (held func() int, closeAll func()) {
	var (
		wg                 sync.WaitGroup
		answered, refused  atomic.Int64
		authorised, failed atomic.Int64
		closed             atomic.Int64
	)
	creds := credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})
	for i := 0; i < floodHashLoops; i++ {
		d := floodDialer(i)
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
			grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cc.Close()
			cs := pb.NewClusterClient(cc)
			cctx := ctx
			// One loop in four carries the admin token: even authorised
			// loops get at most one hash per interval between them.
			withToken := i%4 == 0
			if withToken {
				cctx = metadata.AppendToOutgoingContext(ctx, pb.MetadataAuthorization, "Bearer "+adminToken)
			}
			for j := 0; j < 1_000_000 && ctx.Err() == nil; j++ {
				_, err := cs.Status(cctx, &pb.StatusRequest{WithHash: true})
				switch {
				case err == nil && withToken:
					authorised.Add(1)
				case err == nil:
					answered.Add(1)
				case ctx.Err() != nil:
				case !withToken && status.Code(err) == codes.Unauthenticated:
					refused.Add(1)
				case !withToken:
					// Closed for its rate, or reconnecting: an attacker
					// spinning here would only burn this process's CPU.
					closed.Add(1)
					select { // back off, as an attacker would, until the flood ends
					case <-ctx.Done():
					case <-time.After(10 * time.Millisecond):
					}
				default:
					failed.Add(1)
				}
			}
		}()
	}
	return func() int { return floodHashLoops }, func() {
		wg.Wait()
		t.Logf("hash loops: %d answered without a token, %d refused, %d failed otherwise (connection closed for the rate); %d answered with the admin token, %d failed",
			answered.Load(), refused.Load(), closed.Load(), authorised.Load(), failed.Load())
		if answered.Load() > 0 {
			t.Errorf("%d hashes answered without a token", answered.Load())
		}
	}
}

// clientHello is a TLS ClientHello as a client would send it first.
func clientHello(t *testing.T) []byte {
	t.Helper()
	rec := &helloRecorder{}
	_ = tls.Client(rec, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}).Handshake() // ends at the first read
	if len(rec.b) == 0 {
		t.Fatal("no ClientHello written")
	}
	return rec.b
}

// helloRecorder is a net.Conn that keeps what is written and reads EOF.
type helloRecorder struct {
	net.Conn
	b []byte
}

func (r *helloRecorder) Write(p []byte) (int, error) { r.b = append(r.b, p...); return len(p), nil }
func (r *helloRecorder) Read([]byte) (int, error)    { return 0, io.EOF }
func (r *helloRecorder) SetDeadline(time.Time) error { return nil }
func (r *helloRecorder) SetReadDeadline(time.Time) error {
	return nil
}
func (r *helloRecorder) SetWriteDeadline(time.Time) error { return nil }
