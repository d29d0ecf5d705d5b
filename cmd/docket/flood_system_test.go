//go:build system

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/internal/testaddr"
	"github.com/dockethq/docket/internal/testwait"
)

// The flood: idle HTTP/2 connections used up the leader's file
// descriptors, Pebble failed to open its files and the process died. Here a
// real `docket agent` runs with its file limit lowered to floodFileLimit
// while the test holds floodConns idle HTTP/2 connections to it. The node
// must stay up and keep committing enqueues the whole time, refuse the
// connections past its limit, and take new clients once the flood ends.
const (
	floodFileLimit = 256
	floodConns     = 1000
	floodRaftConns = 300
	floodHold      = 10 * time.Second
	floodPayload   = 64 << 10 // enough enqueues to make Pebble flush and rotate its WAL
)

func Test_System_ConnectionFloodUnderLowFileLimit(t *testing.T) {
	bin := buildDocket(t)
	dir := t.TempDir()
	grpcAddr, raftAddr := testaddr.Free(t), testaddr.Free(t)
	logPath := filepath.Join(dir, "agent.log")
	agent := startLimitedAgent(t, bin, floodFileLimit, logPath, "agent", "--id", "n1", "--data-dir", filepath.Join(dir, "n1"),
		"--grpc-addr", grpcAddr, "--raft-addr", raftAddr, "--gossip-addr", testaddr.Free(t), "--bootstrap-expect", "1")

	c := mustClient(t, grpcAddr)
	testwait.For(t, 20*time.Second, "the agent to take an enqueue", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.EnqueueOne(ctx, "warm", []byte("x"))
		return err == nil
	})

	// Enqueue throughout the flood, on the connection made before it.
	stop := make(chan struct{})
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		committed int
		failures  []error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		payload := bytes.Repeat([]byte("p"), floodPayload)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 5000; i++ { // bounded; the flood ends long before
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := c.EnqueueOne(ctx, "flood", payload)
			cancel()
			mu.Lock()
			if err != nil {
				failures = append(failures, fmt.Errorf("enqueue %d at %s: %w", i, time.Now().Format("15:04:05.000"), err))
			} else {
				committed++
			}
			mu.Unlock()
		}
	}()

	conns := openIdleHTTP2(t, grpcAddr, floodConns)
	t.Logf("holding %d idle HTTP/2 connections against a file limit of %d", len(conns), floodFileLimit)
	// Raft's port is flooded too; idle connections there cost descriptors
	// the same way.
	raftConns := openIdle(t, raftAddr, floodRaftConns)
	t.Logf("and %d idle connections to the Raft port", len(raftConns))
	conns = append(conns, raftConns...)
	holdUntil := time.Now().Add(floodHold)
	maxFDs := 0
	for time.Now().Before(holdUntil) {
		if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", agent.cmd.Process.Pid)); err == nil {
			maxFDs = max(maxFDs, len(fds))
		}
		if gone, err := agent.exited(); gone {
			close(stop)
			wg.Wait()
			t.Fatalf("agent died during the flood (%v); log tail:\n%s", err, tail(logPath, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, cn := range conns {
		_ = cn.Close()
	}
	close(stop)
	wg.Wait()

	if gone, err := agent.exited(); gone {
		t.Fatalf("agent died during the flood (%v); log tail:\n%s", err, tail(logPath, 30))
	}
	agentLog, _ := os.ReadFile(logPath)
	t.Logf("agent held at most %d open files (limit %d)", maxFDs, floodFileLimit)
	// The failure before the process died: Pebble could not
	// open its files. A node in that state is broken even while it answers.
	if n := strings.Count(string(agentLog), "too many open files"); n > 0 {
		t.Fatalf("the agent ran out of file descriptors (%d log lines say %q); log tail:\n%s", n, "too many open files", tail(logPath, 5))
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("committed %d enqueues of %d KiB during the flood, %d failed", committed, floodPayload>>10, len(failures))
	if len(failures) > 0 {
		t.Fatalf("enqueues failed during the flood, first: %v; log tail:\n%s", failures[0], tail(logPath, 30))
	}
	if committed < int(floodHold/time.Second) {
		t.Fatalf("only %d enqueues committed in %v", committed, floodHold)
	}
	// The refusals are what kept the node alive: both limits must have
	// engaged.
	for _, l := range []string{"listener=grpc", "listener=raft"} {
		if !hasLine(string(agentLog), "refusing connections", l) {
			t.Fatalf("the agent never refused a connection (%s); log tail:\n%s", l, tail(logPath, 30))
		}
	}
	// Slots are given back: a new client connects once the flood is gone.
	testwait.For(t, 20*time.Second, "a new client after the flood", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		nc, err := client.New(ctx, []string{grpcAddr})
		if err != nil {
			return false
		}
		defer nc.Close()
		_, err = nc.EnqueueOne(ctx, "after", []byte("x"))
		return err == nil
	})
}

// buildDocket builds this package's binary into a temp dir.
func buildDocket(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "docket")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type childProc struct {
	cmd  *exec.Cmd
	done chan error
	err  error
	gone bool
}

func (p *childProc) exited() (bool, error) {
	select {
	case err := <-p.done:
		p.gone, p.err = true, err
	default:
	}
	return p.gone, p.err
}

// stop kills the process, if it still runs, and waits for it to end.
func (p *childProc) stop() {
	if gone, _ := p.exited(); gone {
		return
	}
	_ = p.cmd.Process.Kill()
	p.err, p.gone = <-p.done, true
}

// startLimitedAgent runs bin with args under a file limit of nofile (soft
// and hard, set by the shell before it execs the binary), logging to
// logPath. Cleanup stops it: SIGTERM, then SIGKILL after 15 s.
func startLimitedAgent(t *testing.T, bin string, nofile int, logPath string, args ...string) *childProc {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile)
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, bin}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(errors.Join(err, logf.Close()))
	}
	p := &childProc{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		defer logf.Close()
		if gone, _ := p.exited(); gone {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-p.done:
			p.gone, p.err = true, err
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// openIdleHTTP2 opens n connections to addr and makes each an HTTP/2
// connection (client preface and an empty SETTINGS frame) that then stays
// idle, as the flood's did. Cleanup closes them all.
func openIdleHTTP2(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	hello := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 0x4, 0, 0, 0, 0, 0)
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			// The accept backlog is full: what is open already floods.
			t.Logf("flood connection %d: %v", i, err)
			break
		}
		conns = append(conns, c)
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write(hello) // a refused connection may already be closed
	}
	return conns
}

// openIdle opens n TCP connections to addr that send nothing. Cleanup
// closes them all.
func openIdle(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Logf("idle connection %d to %s: %v", i, addr, err)
			break
		}
		conns = append(conns, c)
	}
	return conns
}

// hasLine reports whether some line of log holds every one of parts.
func hasLine(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// tail returns the last n lines of a file, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
