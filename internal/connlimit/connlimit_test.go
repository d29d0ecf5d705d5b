package connlimit

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// serve accepts on l until it is closed and hands each connection over.
func serve(t *testing.T, l net.Listener) <-chan net.Conn {
	t.Helper()
	ch := make(chan net.Conn, 16)
	go func() {
		defer close(ch)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			ch <- c
		}
	}()
	return ch
}

func mustListen(t *testing.T, max int) *Listener {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(inner, max, "test", nil)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func mustDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// refusedByServer reports whether the server closed c: a read sees EOF (or
// a reset) before the deadline instead of timing out.
func refusedByServer(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

func accepted(t *testing.T, ch <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted")
		return nil
	}
}

// Connections past the limit are closed at accept; closing one accepted
// connection lets the next one in.
func Test_Listener_RefusesPastLimitAndFreesSlot(t *testing.T) {
	l := mustListen(t, 3)
	ch := serve(t, l)
	addr := l.Addr().String()

	var in []net.Conn
	for i := 0; i < 3; i++ {
		mustDial(t, addr)
		in = append(in, accepted(t, ch))
	}
	if l.Open() != 3 {
		t.Fatalf("open = %d, want 3", l.Open())
	}
	over := mustDial(t, addr)
	if !refusedByServer(over, 5*time.Second) {
		t.Fatal("a connection past the limit was not closed")
	}
	if l.Refused() != 1 || l.Open() != 3 {
		t.Fatalf("refused %d open %d, want 1 and 3", l.Refused(), l.Open())
	}
	select {
	case c := <-ch:
		t.Fatalf("Accept returned %v past the limit", c.RemoteAddr())
	default:
	}

	// Closing twice gives back one slot only.
	_ = in[0].Close()
	_ = in[0].Close()
	if l.Open() != 2 {
		t.Fatalf("open after a close = %d, want 2", l.Open())
	}
	next := mustDial(t, addr)
	got := accepted(t, ch)
	if _, err := next.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	_ = got.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(got, buf); err != nil || buf[0] != 'x' {
		t.Fatalf("the freed slot's connection does not carry data: %v", err)
	}
	if refusedByServer(next, 100*time.Millisecond) {
		t.Fatal("the connection in the freed slot was closed")
	}
	if third := mustDial(t, addr); !refusedByServer(third, 5*time.Second) {
		t.Fatal("the limit no longer holds after a slot was reused")
	}
	if l.Refused() != 2 {
		t.Fatalf("refused = %d, want 2", l.Refused())
	}
}
