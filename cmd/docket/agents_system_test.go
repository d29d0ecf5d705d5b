//go:build system

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dockethq/docket/internal/testaddr"
	"github.com/dockethq/docket/internal/testwait"
)

// agentProc is one `docket agent` process of an agentCluster. Its args
// are kept, so a restart after a kill starts the same node again.
type agentProc struct {
	id, grpc string
	args     []string
	proc     *childProc
	starts   int
}

// agentCluster is three agents of the built binary on loopback, driven by
// the built binary's own verbs: the black-box clusters of the system
// tests.
type agentCluster struct {
	t        *testing.T
	bin, dir string
	nodes    []*agentProc
	grpcs    []string // every node's API address
}

// agentStatus is what the tests read of `docket cluster status --json`.
type agentStatus struct {
	LeaderID            string `json:"leaderId"`
	EnabledFeatureLevel uint32 `json:"enabledFeatureLevel"`
}

// startAgentCluster builds the binary, starts three agents and waits for
// a leader with feature level latched. Test processes pick their ports at
// random, each on its own, so another test may bind a port between the
// check and the agent's bind: an agent that exits for that ("address
// already in use") is started again with the others on new ports, at
// most three times in all. Any other early exit fails the test.
func startAgentCluster(t *testing.T, level uint32) *agentCluster {
	t.Helper()
	bin := buildDocket(t)
	for attempt := 1; ; attempt++ {
		c, taken := tryAgentCluster(t, bin, level)
		if taken == "" {
			return c
		}
		if attempt == 3 {
			t.Fatalf("%s: a port was taken before the agent bound it, %d times", taken, attempt)
		}
		t.Logf("%s: a port was taken before the agent bound it; starting the cluster again on other ports", taken)
		for _, n := range c.nodes {
			n.proc.stop()
		}
	}
}

// tryAgentCluster is one try of startAgentCluster. It returns the id of
// an agent that lost a port to another process, and "" once the cluster
// has formed.
func tryAgentCluster(t *testing.T, bin string, level uint32) (*agentCluster, string) {
	t.Helper()
	c := &agentCluster{t: t, bin: bin, dir: t.TempDir()}
	// Registered before the agents start, so it runs after they stop and
	// their logs are whole.
	t.Cleanup(func() {
		if t.Failed() {
			c.logTails(40)
		}
	})
	var gossips []string
	for i := 1; i <= 3; i++ {
		n := &agentProc{id: fmt.Sprintf("n%d", i), grpc: testaddr.Free(t)}
		c.nodes = append(c.nodes, n)
		c.grpcs, gossips = append(c.grpcs, n.grpc), append(gossips, testaddr.Free(t))
	}
	for i, n := range c.nodes {
		n.args = []string{"agent", "--id", n.id, "--data-dir", filepath.Join(c.dir, n.id), "--grpc-addr", n.grpc,
			"--raft-addr", testaddr.Free(t), "--gossip-addr", gossips[i], "--gossip-local",
			"--bootstrap-expect", "3", "--join", strings.Join(gossips, ",")}
		c.start(n)
	}
	taken := ""
	testwait.For(t, 60*time.Second, fmt.Sprintf("a leader with level %d latched", level), func() bool {
		for _, n := range c.nodes {
			if gone, err := n.proc.exited(); gone {
				log, _ := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("%s-%d.log", n.id, n.starts)))
				if strings.Contains(string(log), "address already in use") {
					taken = n.id
					return true
				}
				t.Fatalf("%s exited before the cluster formed: %v", n.id, err)
			}
		}
		st := c.status(c.grpcs)
		return st.LeaderID != "" && st.EnabledFeatureLevel >= level
	})
	return c, taken
}

// logTails logs the last n lines of every agent's log, so that a failed
// run says what the processes saw.
func (c *agentCluster) logTails(n int) {
	logs, err := filepath.Glob(filepath.Join(c.dir, "*.log"))
	if err != nil {
		c.t.Logf("agent logs: %v", err)
		return
	}
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			c.t.Logf("%s: %v", filepath.Base(path), err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		c.t.Logf("last %d lines of %s:\n%s", min(n, len(lines)), filepath.Base(path), strings.Join(lines[max(0, len(lines)-n):], "\n"))
	}
}

// start starts n's process (again), with a log file per start.
func (c *agentCluster) start(n *agentProc) {
	n.starts++
	n.proc = startLimitedAgent(c.t, c.bin, 4096, filepath.Join(c.dir, fmt.Sprintf("%s-%d.log", n.id, n.starts)), n.args...)
}

// cli runs the built binary's verb against addrs and returns its stdout;
// an error carries its stderr.
func (c *agentCluster) cli(addrs []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	full := append([]string{args[0], "--addr", strings.Join(addrs, ","), "--timeout", "20s"}, args[1:]...)
	out, err := exec.CommandContext(ctx, c.bin, full...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		err = fmt.Errorf("%w: %s", err, ee.Stderr)
	}
	return string(out), err
}

// must is cli that fails the test on an error.
func (c *agentCluster) must(addrs []string, args ...string) string {
	c.t.Helper()
	out, err := c.cli(addrs, args...)
	if err != nil {
		c.t.Fatalf("docket %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// status is the cluster status as addrs answer it; empty when none does.
func (c *agentCluster) status(addrs []string) agentStatus {
	var st agentStatus
	if out, err := c.cli(addrs, "cluster", "status", "--json"); err == nil {
		_ = json.Unmarshal([]byte(out), &st)
	}
	return st
}

// killLeader SIGKILLs the leader's process and waits for a new leader
// among the others. It returns the killed node and the others' addresses.
func (c *agentCluster) killLeader() (*agentProc, []string) {
	c.t.Helper()
	leader := c.status(c.grpcs).LeaderID
	var victim *agentProc
	var rest []string
	for _, n := range c.nodes {
		if n.id == leader {
			victim = n
		} else {
			rest = append(rest, n.grpc)
		}
	}
	if victim == nil {
		c.t.Fatalf("leader %q is none of the nodes", leader)
	}
	if err := victim.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	select {
	case <-victim.proc.done:
		victim.proc.gone = true
	case <-time.After(10 * time.Second):
		c.t.Fatalf("%s survived SIGKILL", victim.id)
	}
	testwait.For(c.t, 30*time.Second, "a new leader among the survivors", func() bool {
		st := c.status(rest)
		return st.LeaderID != "" && st.LeaderID != leader
	})
	return victim, rest
}
