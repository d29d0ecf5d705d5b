package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dockethq/docket/client"
)

// devNode is one child `docket agent` of a dev cluster.
type devNode struct {
	id, grpc, raft, dir, logPath string
	args                         []string
	cmd                          *exec.Cmd
	exited                       chan error
}

// runDev starts a local 3-node cluster as three child processes of this
// binary, so that a node can be killed and restarted like a real server.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "keep the cluster's data here (default: a fresh temp dir, removed on exit)")
	basePort := fs.Int("base-port", 7400, "node i serves gRPC on base+i and Raft on base+100+i, on 127.0.0.1")
	nodes := fs.Int("nodes", 3, "number of nodes (3 or 5)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes < 1 || *nodes > 9 {
		return fmt.Errorf("%w: --nodes %d not in 1..9", errUsage, *nodes)
	}
	dir := *dataDir
	keep := dir != ""
	if !keep {
		var err error
		if dir, err = os.MkdirTemp("", "docket-dev-"); err != nil {
			return fmt.Errorf("dev data dir: %w", err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	var grpcs []string
	for i := 1; i <= *nodes; i++ {
		grpcs = append(grpcs, fmt.Sprintf("127.0.0.1:%d", *basePort+i))
	}
	var cluster []*devNode
	for i := 1; i <= *nodes; i++ {
		n := &devNode{
			id:   fmt.Sprintf("n%d", i),
			grpc: grpcs[i-1],
			raft: fmt.Sprintf("127.0.0.1:%d", *basePort+100+i),
		}
		n.dir = filepath.Join(dir, n.id)
		n.logPath = filepath.Join(dir, n.id+".log")
		n.args = []string{"agent", "--id", n.id, "--data-dir", n.dir, "--grpc-addr", n.grpc, "--raft-addr", n.raft,
			"--bootstrap-expect", fmt.Sprint(*nodes), "--join", strings.Join(grpcs, ",")}
		cluster = append(cluster, n)
	}
	defer func() {
		stopDev(cluster, stderr)
		if !keep {
			if err := os.RemoveAll(dir); err != nil {
				fmt.Fprintln(stderr, "docket dev: remove data dir:", err)
			}
		}
	}()
	for _, n := range cluster {
		if err := n.start(exe); err != nil {
			return err
		}
	}
	leader, err := waitForLeader(ctx, grpcs, cluster)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "docket dev: %d-node cluster ready, leader %s\n", len(cluster), leader)
	fmt.Fprintf(stdout, "data: %s%s\n", dir, map[bool]string{true: "", false: " (removed on exit)"}[keep])
	for _, n := range cluster {
		fmt.Fprintf(stdout, "  %s  grpc %s  raft %s  pid %d  log %s\n", n.id, n.grpc, n.raft, n.cmd.Process.Pid, n.logPath)
	}
	fmt.Fprintf(stdout, "try:  docket enqueue jobs 'hello'   (addresses default to this cluster)\n")
	fmt.Fprintf(stdout, "restart a killed node with:  %s %s\n", exe, strings.Join(cluster[0].args, " "))
	fmt.Fprintf(stdout, "Ctrl-C stops the cluster.\n")

	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(stdout, "docket dev: stopping")
			return nil
		case <-time.After(time.Second):
		}
		for _, n := range cluster {
			select {
			case err := <-n.exited:
				fmt.Fprintf(stdout, "docket dev: %s exited (%v); restart it with: %s %s\n", n.id, err, exe, strings.Join(n.args, " "))
				n.exited = nil
			default:
			}
		}
	}
}

func (n *devNode) start(exe string) error {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s log: %w", n.id, err)
	}
	n.cmd = exec.Command(exe, n.args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	// Own process group: Ctrl-C in the terminal reaches only `docket dev`,
	// which then stops the nodes in order.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		return errors.Join(fmt.Errorf("start %s: %w", n.id, err), logf.Close())
	}
	n.exited = make(chan error, 1)
	go func() {
		err := n.cmd.Wait()
		_ = logf.Close() // the child is gone; its log is complete
		n.exited <- err
	}()
	return nil
}

// stopDev sends SIGTERM to every node and waits, then SIGKILL past 15 s.
func stopDev(nodes []*devNode, stderr io.Writer) {
	for _, n := range nodes {
		if n.cmd != nil && n.cmd.Process != nil && n.exited != nil {
			if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				fmt.Fprintf(stderr, "docket dev: stop %s: %v\n", n.id, err)
			}
		}
	}
	deadline := time.After(15 * time.Second)
	for _, n := range nodes {
		if n.exited == nil {
			continue
		}
		select {
		case <-n.exited:
		case <-deadline:
			_ = n.cmd.Process.Kill() // already past the graceful window
			<-n.exited
		}
	}
}

// waitForLeader polls the cluster until a leader answers, or a node dies.
func waitForLeader(ctx context.Context, addrs []string, nodes []*devNode) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		for _, n := range nodes {
			select {
			case err := <-n.exited:
				n.exited = nil
				return "", fmt.Errorf("%s exited during start (%v); see %s", n.id, err, n.logPath)
			default:
			}
		}
		c, err := client.New(ctx, addrs...)
		if err == nil {
			st, serr := c.Status(ctx)
			cerr := c.Close()
			if serr == nil && cerr == nil && st.GetLeaderId() != "" {
				return st.GetLeaderId() + " at " + st.GetLeaderGrpcAddr(), nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no leader within 30s: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
