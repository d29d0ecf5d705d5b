package transport

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// h2Hello is the HTTP/2 client preface and an empty SETTINGS frame: what
// the idle flood sent before it went quiet.
var h2Hello = append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 0x4, 0, 0, 0, 0, 0)

// dialFrom opens a TCP connection to addr from the loopback address ip
// and sends the HTTP/2 preface.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Write(h2Hello); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedWithin reports whether the server closed c within d: reads see
// EOF or a reset rather than time out (the server's SETTINGS are read and
// skipped).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 256)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
}

// A connection that carried no authenticated call is closed after
// UnprovenTimeout; one that made a Docket call (auth off) stays. Before
// the guard, the preface-only connection stayed for MaxConnectionIdle (5
// minutes).
func Test_ConnGuardClosesUnprovenConnections(t *testing.T) {
	const timeout = 400 * time.Millisecond
	ts := mustLeader(t, Config{UnprovenTimeout: timeout})
	idle := dialFrom(t, "127.0.0.1", ts.addr)

	// A gRPC client that only asks for health proves nothing either.
	hc, err := grpc.NewClient(ts.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	if _, err := healthpb.NewHealthClient(hc).Check(testCtx(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	// ts.cc makes a Docket call: proven.
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})

	if !closedWithin(idle, 5*time.Second) {
		t.Fatal("a connection that only sent the HTTP/2 preface was not closed")
	}
	testwait.For(t, 10*time.Second, "the connection that only asked for health to be closed", func() bool {
		return hc.GetState() != connectivity.Ready
	})
	if st := ts.cc.GetState(); st != connectivity.Ready {
		t.Fatalf("the proven connection is %v after %v", st, 3*timeout)
	}
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})
	if n := ts.srv.guard.expired.Load(); n != 2 {
		t.Fatalf("%d connections expired, want 2", n)
	}
}

// One address holds at most MaxUnprovenPerIP unproven connections: past
// it a connection from there is closed at accept, while another address
// still gets in. Past MaxUnproven in all, the oldest is closed.
func Test_ConnGuardBoundsUnproven(t *testing.T) {
	ts := mustLeader(t, Config{MaxUnprovenPerIP: 3, MaxUnproven: 5, UnprovenTimeout: time.Minute})
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"}) // the client's connection, proven
	waitUnproven(t, ts, 0)
	var first []net.Conn
	for i := 0; i < 3; i++ {
		first = append(first, dialFrom(t, "127.0.0.2", ts.addr))
	}
	waitUnproven(t, ts, 3)
	if c := dialFrom(t, "127.0.0.2", ts.addr); !closedWithin(c, 5*time.Second) {
		t.Fatal("a fourth unproven connection from one address was not refused")
	}
	other := dialFrom(t, "127.0.0.3", ts.addr)
	waitUnproven(t, ts, 4)
	for _, c := range first {
		if closedWithin(c, 50*time.Millisecond) {
			t.Fatal("an unproven connection within the bounds was closed")
		}
	}
	// Two more from two other addresses: the fifth fits, the sixth pushes
	// out the oldest (the first of 127.0.0.2).
	dialFrom(t, "127.0.0.4", ts.addr)
	waitUnproven(t, ts, 5)
	dialFrom(t, "127.0.0.5", ts.addr)
	if !closedWithin(first[0], 5*time.Second) {
		t.Fatal("the oldest unproven connection was not closed past MaxUnproven")
	}
	if closedWithin(first[1], 50*time.Millisecond) || closedWithin(other, 50*time.Millisecond) {
		t.Fatal("a newer unproven connection was closed")
	}
	if ts.srv.guard.evicted.Load() != 1 || ts.srv.guard.refusedByIP.Load() != 1 {
		t.Fatalf("evicted %d refused %d, want 1 and 1", ts.srv.guard.evicted.Load(), ts.srv.guard.refusedByIP.Load())
	}
	// The proven connection is not counted and still works.
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})
	waitUnproven(t, ts, 5)
}

func waitUnproven(t *testing.T, ts *testServer, want int) {
	t.Helper()
	testwait.For(t, 10*time.Second, fmt.Sprintf("%d unproven connections", want), func() bool { return ts.srv.guard.unproven() == want })
}

// Calls without a token from one address are paced at UnprovenCallRate
// after a burst of twice as many; more than a few waiting at once close
// the connection. Before, 16 loops of tokenless calls ran as fast as the
// server answered.
func Test_ConnGuardPacesTokenlessCalls(t *testing.T) {
	const rate = 20
	ts := mustLeader(t, Config{Auth: true, UnprovenCallRate: rate})
	if err := ts.node.Service().Bootstrap(testCtx(t), adminSecret); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	start := time.Now()
	const n = 2*rate + rate // the burst, then a second's worth
	for i := 0; i < n; i++ {
		if _, err := ts.c.Status(ctx, &pb.StatusRequest{}); err != nil {
			t.Fatalf("status %d: %v", i, err)
		}
	}
	if d := time.Since(start); d < 800*time.Millisecond {
		t.Fatalf("%d tokenless calls took %v, want about a second past the burst", n, d)
	}
	if ts.srv.guard.overCalls.Load() != 0 {
		t.Fatal("a sequential loop had its connection closed")
	}

	// 16 at once on an empty bucket: the backlog overflows.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := ts.c.Status(ctx, &pb.StatusRequest{})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	refused := 0
	for err := range errs {
		if status.Code(err) == codes.Unavailable {
			refused++
		}
	}
	if refused == 0 || ts.srv.guard.overCalls.Load() == 0 {
		t.Fatalf("16 tokenless calls at once: %d refused, %d connections closed", refused, ts.srv.guard.overCalls.Load())
	}
	// A call with a token proves a new connection and is not paced.
	start = time.Now()
	for i := 0; i < n; i++ {
		if _, err := ts.c.Status(as(ctx, adminSecret), &pb.StatusRequest{}); err != nil && i > 0 {
			t.Fatalf("status with a token %d: %v", i, err)
		}
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("%d calls with a token took %v", n, d)
	}
}

// Calls refused for their token are paced as well: a loop of tokenless
// Enqueues costs the server as much as one of Status.
func Test_ConnGuardPacesRefusedCalls(t *testing.T) {
	const rate = 20
	ts := mustLeader(t, Config{Auth: true, UnprovenCallRate: rate})
	ctx := testCtx(t)
	start := time.Now()
	const n = 3 * rate
	for i := 0; i < n; i++ {
		_, err := ts.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}})
		wantCode(t, "enqueue without a token", err, codes.Unauthenticated)
	}
	if d := time.Since(start); d < 800*time.Millisecond {
		t.Fatalf("%d refused calls took %v, want about a second past the burst", n, d)
	}
}
