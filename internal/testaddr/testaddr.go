// Package testaddr hands tests loopback addresses to listen on. It
// imports nothing of the project, so every package's tests may use it.
package testaddr

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
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
//
// A port is free when Free looks, and is bound later, often by a child
// process. Between the two, another test could be handed the same port
// (go test runs packages as processes side by side), and one of the two
// then fails with "address already in use". So Free also takes a lock
// on the port (reserve) that this process holds until it exits: no two
// calls, in one process or in many, hand out the same port.
func Free(t testing.TB) string {
	t.Helper()
	for range 1000 {
		port := Low + rand.IntN(High-Low)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if IsFree(addr) && reserve(port) {
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

var (
	mu   sync.Mutex
	held []*os.File // the reserved ports' locks, held until the process exits
)

// reserve takes an exclusive lock on a file named for port in a
// directory every test process shares, and keeps it. A lock held by
// another process, or by an earlier call of this one (flock locks belong
// to the open file, not the process), refuses it. Where no lock can be
// made at all, it grants the port, as Free did before locks.
func reserve(port int) bool {
	dir := filepath.Join(os.TempDir(), "docket-testaddr")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	mu.Lock()
	held = append(held, f)
	mu.Unlock()
	return true
}
