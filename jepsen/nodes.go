package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Node is one docket agent process in its namespace.
type Node struct {
	I       int // 1-based
	ID      string
	DataDir string
	LogPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	paused  bool
	offset  time.Duration
	running bool
	// bin is the binary this node runs; "" is the cluster's (Cluster.Bin).
	// The rolling upgrade switches it to Cluster.NewBin.
	bin string
}

// Cluster runs the agents.
type Cluster struct {
	Net *Net
	// Bin is the binary every node runs unless its own is set, and the
	// one the harness's helpers (tls, token) run.
	Bin string
	// NewBin is the current binary a rolling upgrade moves each node to,
	// when the cluster started on an older one; "" otherwise.
	NewBin string
	Dir    string
	Nodes  []*Node
	log    *slog.Logger
	// ReapGrace is passed to every agent: a new leader's wait before its
	// first reap. Shorter than the default so that a drain after many
	// leader changes ends sooner; still longer than the workers' heartbeat.
	ReapGrace time.Duration
	// Sec is the secure mode's certificates and tokens; nil runs the
	// nodes in plaintext without auth (--insecure).
	Sec *Security
	// Loop puts each node's data directory on its own loop-mounted ext4
	// image, for the lost-unfsynced-writes fault.
	Loop bool
	// LogStore is every agent's --log-store; "" is the agent's default.
	LogStore string
	// DiskSize overrides loopImageSize; LogMaxBytes is every agent's
	// --log-max-bytes (RunConfig).
	DiskSize, LogMaxBytes string
	// Env is added to every agent's environment (DOCKET_PLANT).
	Env []string
}

// gossipPort is every node's memberlist port (docket agent's default
// scheme: gRPC 74xx, Raft 75xx, gossip 73xx).
const gossipPort = 7301

// GRPCAddrs are the nodes' client addresses (reachable from the control
// namespace only).
func (c *Cluster) GRPCAddrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, fmt.Sprintf("%s:%d", nodeIP(n.I), grpcPort))
	}
	return out
}

func newCluster(net *Net, bin, dir string, log *slog.Logger) (*Cluster, error) {
	c := &Cluster{Net: net, Bin: bin, Dir: dir, log: log, ReapGrace: 2 * time.Second}
	for i := 1; i <= net.N; i++ {
		n := &Node{I: i, ID: "n" + strconv.Itoa(i), DataDir: filepath.Join(dir, "data", "n"+strconv.Itoa(i)),
			LogPath: filepath.Join(dir, "logs", "n"+strconv.Itoa(i)+".log")}
		for _, d := range []string{n.DataDir, filepath.Dir(n.LogPath)} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, fmt.Errorf("cluster dir: %w", err)
			}
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, nil
}

// Start starts node n (again), with its clock offset if one is set.
func (c *Cluster) Start(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.running {
		return nil
	}
	bin := c.Bin
	if n.bin != "" {
		bin = n.bin
	}
	args := append([]string{"netns", "exec", c.Net.NodeNS(n.I), bin}, c.agentArgs(n)...)
	lf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("node log: %w", err)
	}
	fmt.Fprintf(lf, "=== harness: start %s (clock offset %s, binary %s) at %s\n", n.ID, n.offset, bin, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command("ip", args...) // ip netns exec execs the agent: the pid is the agent's
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = c.agentEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("start %s: %w", n.ID, err)
	}
	n.cmd, n.running, n.paused = cmd, true, false
	n.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		err := cmd.Wait()
		lf.Close()
		n.mu.Lock()
		if n.cmd == cmd {
			n.running = false
		}
		n.mu.Unlock()
		c.log.Debug("node exited", "node", n.ID, "err", err)
		close(done)
	}(cmd, n.exited)
	return nil
}

// agentArgs is node n's `docket agent` command line; n.mu is held. Every
// flag the harness gives an agent is here, so that a change to how nodes
// find each other or secure their channels is one edit.
func (c *Cluster) agentArgs(n *Node) []string {
	var join []string // every other node's gossip address
	for _, o := range c.Nodes {
		if o.I != n.I {
			join = append(join, fmt.Sprintf("%s:%d", nodeIP(o.I), gossipPort))
		}
	}
	args := []string{"agent", "--id", n.ID, "--data-dir", n.DataDir,
		"--grpc-addr", fmt.Sprintf("%s:%d", nodeIP(n.I), grpcPort), "--raft-addr", fmt.Sprintf("%s:%d", nodeIP(n.I), raftPort),
		"--gossip-addr", fmt.Sprintf("%s:%d", nodeIP(n.I), gossipPort),
		"--bootstrap-expect", strconv.Itoa(len(c.Nodes)), "--join", strings.Join(join, ","),
		"--reap-grace", c.ReapGrace.String()}
	if c.LogStore != "" {
		args = append(args, "--log-store", c.LogStore)
	}
	if c.LogMaxBytes != "" {
		args = append(args, "--log-max-bytes", c.LogMaxBytes)
	}
	if n.offset != 0 {
		args = append(args, "--test-clock-offset", n.offset.String())
	}
	if c.Sec != nil {
		args = append(args, c.Sec.agentArgs(n.ID)...)
	}
	return args
}

// signal sends sig to node n's process, if running.
func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.running || n.cmd.Process == nil {
		return errors.New(n.ID + " not running")
	}
	if sig == syscall.SIGSTOP {
		n.paused = true
	}
	if sig == syscall.SIGCONT {
		n.paused = false
	}
	return n.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL and waits (bounded) for the process to go.
func (c *Cluster) Kill(n *Node) error {
	_ = n.signal(syscall.SIGCONT)
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	return n.waitExit(10 * time.Second)
}

// Stop sends SIGTERM, then SIGKILL after grace.
func (c *Cluster) Stop(n *Node, grace time.Duration) {
	_ = n.signal(syscall.SIGCONT)
	if n.signal(syscall.SIGTERM) != nil {
		return
	}
	if n.waitExit(grace) != nil {
		_ = c.Kill(n)
	}
}

func (n *Node) waitExit(d time.Duration) error {
	n.mu.Lock()
	ch := n.exited
	n.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-time.After(d):
		return fmt.Errorf("%s did not exit within %s", n.ID, d)
	}
}

// Running reports whether n's process is up.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.running
}

// Leader asks the cluster, from inside the control namespace, which node
// leads, by re-executing this binary's "leader" verb there. 0 means unknown.
func (c *Cluster) Leader(ctx context.Context, self string) int {
	return c.leader(ctx, self)
}

// MoveLeader asks the cluster to make node n the leader and returns the
// leader afterwards (0: unknown).
func (c *Cluster) MoveLeader(ctx context.Context, self string, n *Node) int {
	return c.leader(ctx, self, "--transfer-to", n.ID)
}

func (c *Cluster) leader(ctx context.Context, self string, extra ...string) int {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	args := append([]string{"netns", "exec", c.Net.CtlNS(), self, "leader", "--nodes", strings.Join(c.GRPCAddrs(), ",")}, extra...)
	args = append(args, c.adminCreds().Args()...)
	out, err := exec.CommandContext(ctx, "ip", args...).Output()
	if err != nil {
		// Warn, with the helper's stderr: a lookup that always fails (a
		// credential the nodes refuse) would quietly turn every
		// leader-targeted fault into a random one.
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		c.log.Warn("leader lookup", "err", err)
		return 0
	}
	id := strings.TrimSpace(string(out))
	for _, n := range c.Nodes {
		if n.ID == id {
			return n.I
		}
	}
	return 0
}

// agentEnv is an agent's environment: the harness's own without Docket
// secrets, plus the join token in the secure mode (Security.agentEnv).
func (c *Cluster) agentEnv() []string {
	env := withoutSecrets(os.Environ())
	if c.Sec != nil {
		env = c.Sec.agentEnv()
	}
	// Only the run's own Env plants faults, never the harness's.
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, PlantEnv+"=") })
	return append(env, c.Env...)
}

// adminCreds are the credentials of the controller's helpers (leader,
// health): the bootstrap admin token, which TransferLeadership needs.
func (c *Cluster) adminCreds() Creds {
	if c.Sec == nil {
		return Creds{}
	}
	return c.Sec.Creds(RoleAdmin)
}
