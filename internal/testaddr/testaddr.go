// Package testaddr hands tests loopback addresses to listen on. It
// imports nothing of the project, so every package's tests may use it.
package testaddr

import (
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
)

// Low and High bound the ports Free picks from. They lie below Linux's
// default ephemeral range (32768–60999), so a port handed out cannot be
// taken meanwhile as the source port of some test's outgoing connection:
// that is how "127.0.0.1:0 then close" loses its port when many
// processes dial at once. Ports below Low are left to tests that need a
// block of ports around one base (`docket dev --base-port`), so the two
// never hand out the same port.
const (
	Low  = 20000
	High = 32000
)

// Free returns a 127.0.0.1 address whose port is free for TCP and UDP
// both: memberlist binds the two on one port, and a port free for TCP
// alone can still fail the gossip bind.
func Free(t testing.TB) string {
	t.Helper()
	for range 1000 {
		addr := fmt.Sprintf("127.0.0.1:%d", Low+rand.IntN(High-Low))
		if IsFree(addr) {
			return addr
		}
	}
	t.Fatalf("no free loopback port in %d–%d after 1000 tries", Low, High)
	return ""
}

// IsFree reports whether addr can be listened on now, for TCP and UDP.
func IsFree(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	p, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	return p.Close() == nil
}
