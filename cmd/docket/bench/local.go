package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dockethq/docket/client"
)

// localNode is one child `docket agent` of the benchmark's own cluster.
type localNode struct {
	id, grpc, logPath string
	args              []string
	cmd               *exec.Cmd
	exited            chan error // nil while not running
}

// localCluster is a fresh 3-node cluster on loopback, as `docket dev` runs
// it: child processes of this binary, in a temp dir removed by Close.
type localCluster struct {
	exe   string
	dir   string
	keep  bool
	nodes []*localNode
	ready time.Time // when a leader first answered
}

func startLocal(ctx context.Context, exe string, basePort, n int, keep bool, extra []string) (*localCluster, error) {
	dir, err := os.MkdirTemp("", "docket-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench data dir: %w", err)
	}
	lc := &localCluster{exe: exe, dir: dir, keep: keep}
	var grpcs []string
	for i := 1; i <= n; i++ {
		grpcs = append(grpcs, fmt.Sprintf("127.0.0.1:%d", basePort+i))
	}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		ln := &localNode{id: id, grpc: grpcs[i-1], logPath: filepath.Join(dir, id+".log")}
		ln.args = append([]string{"agent", "--id", id, "--data-dir", filepath.Join(dir, id),
			"--grpc-addr", ln.grpc, "--raft-addr", fmt.Sprintf("127.0.0.1:%d", basePort+100+i),
			"--bootstrap-expect", strconv.Itoa(n), "--join", strings.Join(grpcs, ","), "--log-level", "warn",
			"--debug-addr", fmt.Sprintf("127.0.0.1:%d", basePort+200+i)}, extra...)
		lc.nodes = append(lc.nodes, ln)
	}
	for _, ln := range lc.nodes {
		if err := ln.start(exe); err != nil {
			return nil, errors.Join(err, lc.Close())
		}
	}
	if err := lc.waitLeader(ctx, 30*time.Second); err != nil {
		return nil, errors.Join(err, lc.Close())
	}
	lc.ready = time.Now()
	return lc, nil
}

// Addrs are the nodes' gRPC addresses.
func (lc *localCluster) Addrs() []string {
	var out []string
	for _, n := range lc.nodes {
		out = append(out, n.grpc)
	}
	return out
}

func (n *localNode) start(exe string) error {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s log: %w", n.id, err)
	}
	n.cmd = exec.Command(exe, n.args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		return errors.Join(fmt.Errorf("start %s: %w", n.id, err), logf.Close())
	}
	ch := make(chan error, 1)
	n.exited = ch
	cmd := n.cmd
	go func() {
		err := cmd.Wait()
		_ = logf.Close() // the child is gone; its log is complete
		ch <- err
	}()
	return nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (n *localNode) kill() error {
	if n.exited == nil {
		return fmt.Errorf("%s is not running", n.id)
	}
	if err := n.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", n.id, err)
	}
	<-n.exited
	n.exited = nil
	return nil
}

// rssBytes reads VmRSS of the running node from /proc.
func (n *localNode) rssBytes() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("rss of %s: %w", n.id, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("rss of %s: %w", n.id, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("rss of %s: no VmRSS", n.id)
}

// byAddr finds the node serving gRPC at addr.
func (lc *localCluster) byAddr(addr string) *localNode {
	for _, n := range lc.nodes {
		if n.grpc == addr {
			return n
		}
	}
	return nil
}

// waitLeader polls until some node names a leader, a node dies, or d ends.
func (lc *localCluster) waitLeader(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		for _, n := range lc.nodes {
			if n.exited == nil {
				continue
			}
			select {
			case err := <-n.exited:
				n.exited = nil
				return fmt.Errorf("%s exited during start (%v); see %s", n.id, err, n.logPath)
			default:
			}
		}
		c, err := client.New(ctx, lc.Addrs()...)
		if err == nil {
			st, serr := c.Status(ctx)
			_ = c.Close()
			if serr == nil && st.GetLeaderId() != "" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no leader within %v: %w (logs in %s)", d, ctx.Err(), lc.dir)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close stops every node (SIGTERM, SIGKILL after 15 s) and removes the
// data dir unless asked to keep it.
func (lc *localCluster) Close() error {
	for _, n := range lc.nodes {
		if n.exited != nil {
			_ = n.cmd.Process.Signal(syscall.SIGTERM) // a gone process is fine
		}
	}
	deadline := time.After(15 * time.Second)
	for _, n := range lc.nodes {
		if n.exited == nil {
			continue
		}
		select {
		case <-n.exited:
		case <-deadline:
			_ = n.cmd.Process.Kill() // past the graceful window
			<-n.exited
		}
		n.exited = nil
	}
	if lc.keep {
		return nil
	}
	if err := os.RemoveAll(lc.dir); err != nil {
		return fmt.Errorf("remove bench data dir: %w", err)
	}
	return nil
}
