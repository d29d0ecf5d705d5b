// Package localcluster runs a Docket cluster on this machine as child
// `docket agent` processes on 127.0.0.1, for `docket dev` and `docket bench`.
// Real processes, so a node can be killed and restarted like a server.
//
// # Decisions and trade-offs
//
//   - Ports are fixed from a base (gRPC base+i, Raft base+100+i, pprof
//     base+200+i when asked), so the CLI's default addresses reach `docket
//     dev` and a restarted node keeps the address its peers know.
//   - Each child gets its own process group: Ctrl-C in a terminal reaches
//     only the parent, which then stops the nodes in order (SIGTERM, then
//     SIGKILL after 15 s).
//   - Node output goes to a log file per node in the data dir, not the
//     terminal.
package localcluster

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
	"github.com/dockethq/docket/cmd/docket/tlsgen"
)

// Options say what to start.
type Options struct {
	Exe       string   // the docket binary
	Dir       string   // data dir; empty: a fresh temp dir
	TempName  string   // prefix of that temp dir
	Keep      bool     // leave the data dir at Close (always when Dir is given)
	BasePort  int      // node i: gRPC base+i, Raft base+100+i, gossip base-100+i
	Nodes     int      // how many
	Debug     bool     // serve pprof on base+200+i
	ExtraArgs []string // more `docket agent` flags for every node
	// TLS makes a throwaway CA in Dir/tls, a server certificate per node
	// and a client certificate, and runs the nodes with TLS on.
	TLS bool
}

// TLSFiles are a client's TLS files: the CA and a client certificate.
type TLSFiles struct{ CA, Cert, Key string }

// Node is one child agent.
type Node struct {
	ID, GRPC, Raft, LogPath string
	Args                    []string // the agent's arguments, to restart it by hand
	exe                     string
	cmd                     *exec.Cmd
	exited                  chan error // nil while not running
}

// Cluster is a running local cluster.
type Cluster struct {
	Dir   string
	Nodes []*Node
	Ready time.Time // when a leader first answered
	// TLS, when Options.TLS, is what a client connects with.
	TLS  *TLSFiles
	keep bool
}

// ClientOptions are the client options that reach this cluster.
func (c *Cluster) ClientOptions() []client.Option {
	if c.TLS == nil {
		return nil
	}
	return []client.Option{client.WithTLS(c.TLS.CA, c.TLS.Cert, c.TLS.Key)}
}

// makeTLS writes the cluster's CA, a server certificate per node and a
// client certificate into dir.
func (c *Cluster) makeTLS(dir string) (map[string][2]string, error) {
	ca, _, err := tlsgen.CA(dir, 30)
	if err != nil {
		return nil, err
	}
	servers := map[string][2]string{}
	for _, n := range c.Nodes {
		crt, key, err := tlsgen.Cert(tlsgen.CertOptions{Dir: dir, Name: n.ID, Server: true, Days: 30})
		if err != nil {
			return nil, err
		}
		servers[n.ID] = [2]string{crt, key}
	}
	crt, key, err := tlsgen.Cert(tlsgen.CertOptions{Dir: dir, Name: "client", Days: 30})
	if err != nil {
		return nil, err
	}
	c.TLS = &TLSFiles{CA: ca, Cert: crt, Key: key}
	return servers, nil
}

// Start launches the nodes and waits until one of them leads. It returns
// the leader as "id at addr".
func Start(ctx context.Context, o Options) (*Cluster, string, error) {
	c := &Cluster{Dir: o.Dir, keep: o.Keep || o.Dir != ""}
	if c.Dir == "" {
		var err error
		if c.Dir, err = os.MkdirTemp("", o.TempName); err != nil {
			return nil, "", fmt.Errorf("cluster data dir: %w", err)
		}
	}
	var grpcs, gossips []string
	for i := 1; i <= o.Nodes; i++ {
		grpcs = append(grpcs, fmt.Sprintf("127.0.0.1:%d", o.BasePort+i))
		gossips = append(gossips, fmt.Sprintf("127.0.0.1:%d", o.BasePort-100+i))
	}
	for i := 1; i <= o.Nodes; i++ {
		n := &Node{ID: fmt.Sprintf("n%d", i), GRPC: grpcs[i-1], Raft: fmt.Sprintf("127.0.0.1:%d", o.BasePort+100+i), exe: o.Exe}
		n.LogPath = filepath.Join(c.Dir, n.ID+".log")
		n.Args = []string{"agent", "--id", n.ID, "--data-dir", filepath.Join(c.Dir, n.ID), "--grpc-addr", n.GRPC,
			"--raft-addr", n.Raft, "--bootstrap-expect", strconv.Itoa(o.Nodes), "--join", strings.Join(gossips, ","),
			"--gossip-addr", gossips[i-1], "--gossip-local",
			// A throwaway cluster needs no space kept in reserve; writing
			// 64 MiB per node would only slow its start.
			"--ballast-size", "0"}
		if o.Debug {
			n.Args = append(n.Args, "--debug-addr", fmt.Sprintf("127.0.0.1:%d", o.BasePort+200+i))
		}
		c.Nodes = append(c.Nodes, n)
	}
	if o.TLS {
		servers, err := c.makeTLS(filepath.Join(c.Dir, "tls"))
		if err != nil {
			return nil, "", errors.Join(fmt.Errorf("cluster certificates: %w", err), c.Close())
		}
		for _, n := range c.Nodes {
			n.Args = append(n.Args, "--tls-ca", c.TLS.CA, "--tls-cert", servers[n.ID][0], "--tls-key", servers[n.ID][1])
		}
	}
	for _, n := range c.Nodes {
		n.Args = append(n.Args, o.ExtraArgs...)
	}
	for _, n := range c.Nodes {
		if err := n.Start(); err != nil {
			return nil, "", errors.Join(err, c.Close())
		}
	}
	leader, err := c.waitLeader(ctx, 30*time.Second)
	if err != nil {
		return nil, "", errors.Join(err, c.Close())
	}
	c.Ready = time.Now()
	return c, leader, nil
}

// Addrs are the nodes' gRPC addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.GRPC)
	}
	return out
}

// ByAddr finds the node serving gRPC at addr.
func (c *Cluster) ByAddr(addr string) *Node {
	for _, n := range c.Nodes {
		if n.GRPC == addr {
			return n
		}
	}
	return nil
}

// Start runs the node's agent (again), appending to its log.
func (n *Node) Start() error {
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s log: %w", n.ID, err)
	}
	n.cmd = exec.Command(n.exe, n.Args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		return errors.Join(fmt.Errorf("start %s: %w", n.ID, err), logf.Close())
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

// Pid is the running agent's process id, 0 when not running.
func (n *Node) Pid() int {
	if n.exited == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Exited reports, once, that a running node has ended and how.
func (n *Node) Exited() (ended bool, err error) {
	if n.exited == nil {
		return false, nil
	}
	select {
	case err := <-n.exited:
		n.exited = nil
		return true, err
	default:
		return false, nil
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (n *Node) Kill() error {
	if n.exited == nil {
		return fmt.Errorf("%s is not running", n.ID)
	}
	if err := n.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", n.ID, err)
	}
	<-n.exited
	n.exited = nil
	return nil
}

// RSSBytes reads VmRSS of the running node from /proc.
func (n *Node) RSSBytes() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.Pid()))
	if err != nil {
		return 0, fmt.Errorf("rss of %s: %w", n.ID, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("rss of %s: %w", n.ID, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("rss of %s: no VmRSS", n.ID)
}

// waitLeader polls until some node names a leader, a node dies, or d ends.
func (c *Cluster) waitLeader(ctx context.Context, d time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		for _, n := range c.Nodes {
			if gone, err := n.Exited(); gone {
				return "", fmt.Errorf("%s exited during start (%v); see %s", n.ID, err, n.LogPath)
			}
		}
		cl, err := client.NewWithOptions(ctx, c.Addrs(), c.ClientOptions()...)
		if err == nil {
			st, serr := cl.Status(ctx)
			cerr := cl.Close()
			if serr == nil && cerr == nil && st.GetLeaderId() != "" {
				return st.GetLeaderId() + " at " + st.GetLeaderGrpcAddr(), nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no leader within %v: %w (logs in %s)", d, ctx.Err(), c.Dir)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close stops every running node (SIGTERM, SIGKILL after 15 s) and removes
// the data dir unless it is kept.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.Nodes {
		if n.exited != nil {
			if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				errs = append(errs, fmt.Errorf("stop %s: %w", n.ID, err))
			}
		}
	}
	deadline := time.After(15 * time.Second)
	for _, n := range c.Nodes {
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
	if !c.keep {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove data dir: %w", err))
		}
	}
	return errors.Join(errs...)
}
