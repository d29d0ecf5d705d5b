// Package localcluster runs a Docket cluster on this machine as child
// `docket agent` processes on 127.0.0.1, for `docket dev` and `docket bench`.
// Real processes, so a node can be killed and restarted like a server.
//
// # Decisions and trade-offs
//
//   - Ports are fixed from a base (gRPC base+i, Raft base+100+i, pprof
//     base+200+i and the dashboard base+300+i when asked), so the CLI's default addresses reach `docket
//     dev` and a restarted node keeps the address its peers know.
//   - Each child gets its own process group: Ctrl-C in a terminal reaches
//     only the parent, which then stops the nodes in order (SIGTERM, then
//     SIGKILL after 15 s).
//   - Node output goes to a log file per node in the data dir, not the
//     terminal.
//   - TLS and Auth are generated on the first run and reused from a kept
//     data dir (certificates, admin.token), so a restarted cluster keeps
//     the CA and the token its clients hold. The admin secret reaches the
//     nodes by a file, never a flag (ps, /debug/pprof/cmdline). Start
//     returns only once every node accepts the token, so the first call
//     a user makes cannot meet a node that has not applied it yet.
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
)

// Options say what to start.
type Options struct {
	Exe       string   // the docket binary
	Dir       string   // data dir; empty: a fresh temp dir
	TempName  string   // prefix of that temp dir
	Keep      bool     // leave the data dir at Close (always when Dir is given)
	BasePort  int      // node i: gRPC base+i, Raft base+100+i, gossip base-100+i
	Nodes     int      // how many
	Debug     bool     // serve /metrics and pprof on base+200+i (Node.Metrics)
	Dashboard bool     // serve the web dashboard on base+300+i (Node.HTTP)
	ExtraArgs []string // more `docket agent` flags for every node
	// TLS makes a throwaway CA in Dir/tls, a server certificate per node
	// and a client certificate, and runs the nodes with TLS on. A kept
	// Dir reuses the files of the previous run.
	TLS bool
	// Auth runs the nodes with --auth and a bootstrap admin token whose
	// secret is minted into Dir/admin.token (0600), or read from it when a
	// previous run left it there.
	Auth bool
}

// TLSFiles are a client's TLS files: the CA and a client certificate.
type TLSFiles struct{ CA, Cert, Key string }

// Node is one child agent.
type Node struct {
	ID, GRPC, Raft, LogPath string
	// HTTP is the dashboard's URL when Options.Dashboard, else "".
	HTTP string
	// Metrics is the node's Prometheus /metrics URL when Options.Debug,
	// else "". It is HTTPS with a bearer token when the cluster runs TLS
	// and Auth, as the agent's debug server is.
	Metrics string
	DataDir string
	Args    []string // the agent's arguments, to restart it by hand
	exe     string
	cmd     *exec.Cmd
	exited  chan error // nil while not running
}

// Cluster is a running local cluster.
type Cluster struct {
	Dir   string
	Nodes []*Node
	Ready time.Time // when a leader first answered
	// TLS, when Options.TLS, is what a client connects with.
	TLS *TLSFiles
	// Token, when Options.Auth, is the admin token's secret, read by the
	// nodes from TokenFile.
	Token, TokenFile string
	keep             bool
}

// ClientOptions are the client options that reach this cluster.
func (c *Cluster) ClientOptions() []client.Option {
	var opts []client.Option
	if c.TLS != nil {
		opts = append(opts, client.WithTLS(c.TLS.CA, c.TLS.Cert, c.TLS.Key))
	}
	if c.Token != "" {
		opts = append(opts, client.WithToken(c.Token))
	}
	return opts
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
	} else if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		// 0700: it holds the admin token and the keys.
		return nil, "", fmt.Errorf("cluster data dir: %w", err)
	}
	// Absolute, so the paths it prints (env file, restart command) work
	// from any directory.
	if abs, err := filepath.Abs(c.Dir); err == nil {
		c.Dir = abs
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
		n.DataDir = filepath.Join(c.Dir, n.ID)
		if o.Debug {
			addr := fmt.Sprintf("127.0.0.1:%d", o.BasePort+200+i)
			n.Args = append(n.Args, "--debug-addr", addr)
			n.Metrics = map[bool]string{true: "https://", false: "http://"}[o.TLS && o.Auth] + addr + "/metrics"
		}
		if o.Dashboard {
			addr := fmt.Sprintf("127.0.0.1:%d", o.BasePort+300+i)
			n.Args = append(n.Args, "--http-addr", addr)
			// The agent serves HTTPS exactly when it runs TLS.
			n.HTTP = map[bool]string{true: "https://", false: "http://"}[o.TLS] + addr + "/"
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
	if o.Auth {
		if err := c.makeToken(c.Dir); err != nil {
			return nil, "", errors.Join(fmt.Errorf("cluster admin token: %w", err), c.Close())
		}
		keyFile, err := makeGossipKey(c.Dir)
		if err != nil {
			return nil, "", errors.Join(fmt.Errorf("cluster gossip key: %w", err), c.Close())
		}
		for _, n := range c.Nodes {
			n.Args = append(n.Args, "--auth", "--bootstrap-token-file", c.TokenFile, "--gossip-key-file", keyFile)
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
	// "ready" means every node serves, not only that one leads.
	if err := c.waitServing(ctx, 60*time.Second); err != nil {
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

// PIDFile is the file in an agent's data dir that holds its pid while it
// serves (docket agent writes it).
const PIDFile = "docket.pid"

// HandPID is the pid of an agent that serves this node's data dir while
// the cluster does not run it: one an operator restarted by hand with the
// printed command. 0 when there is none.
func (n *Node) HandPID() int {
	if n.exited != nil {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(n.DataDir, PIDFile))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !alive(pid, n.DataDir) {
		return 0
	}
	return pid
}

// alive reports whether pid runs an agent on dataDir: a pid file left by
// a killed agent may name a pid reused since by another process.
func alive(pid int, dataDir string) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // no /proc to read: trust the signal
	}
	return strings.Contains(string(cmdline), dataDir)
}

// waitGone polls until pid no longer runs an agent on dataDir; past
// deadline it sends SIGKILL and waits one more second.
func waitGone(pid int, dataDir string, deadline <-chan time.Time) error {
	killed := false
	for alive(pid, dataDir) {
		select {
		case <-deadline:
			if killed {
				return fmt.Errorf("pid %d did not stop", pid)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL) // gone or going: the loop checks
			killed, deadline = true, time.After(time.Second)
		case <-time.After(50 * time.Millisecond):
		}
	}
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
		cl, err := client.New(ctx, c.Addrs(), c.ClientOptions()...)
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

// Close stops every running node (SIGTERM, SIGKILL after 15 s), and any
// node an operator restarted by hand on its data dir (HandPID), and
// removes the data dir unless it is kept.
func (c *Cluster) Close() error {
	var errs []error
	hand := map[*Node]int{}
	for _, n := range c.Nodes {
		if n.exited != nil {
			if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				errs = append(errs, fmt.Errorf("stop %s: %w", n.ID, err))
			}
		} else if pid := n.HandPID(); pid > 0 {
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("stop %s (pid %d): %w", n.ID, pid, err))
			}
			hand[n] = pid
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
	// Not our children: poll until each is gone, SIGKILL past the window.
	for n, pid := range hand {
		if err := waitGone(pid, n.DataDir, deadline); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", n.ID, err))
		}
	}
	if !c.keep {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove data dir: %w", err))
		}
	}
	return errors.Join(errs...)
}
