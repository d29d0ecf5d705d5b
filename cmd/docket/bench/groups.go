package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cmd/docket/tlsgen"
)

// ceilingNode is the parent's handle on one ceiling-node process.
type ceilingNode struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *json.Decoder
}

func (n *ceilingNode) read() (nodeMsg, error) {
	var m nodeMsg
	if err := n.out.Decode(&m); err != nil {
		return m, fmt.Errorf("ceiling node: %w", err)
	}
	if m.Err != "" {
		return m, fmt.Errorf("ceiling node: %s", m.Err)
	}
	return m, nil
}

// ceilingProcs is the raft ceiling in three processes, one per server, each
// hosting one server of every one of r.cfg.Groups independent Raft groups
// over the no-op FSM, with the groups' leaders spread evenly over the
// processes. conc callers in all are split evenly over the groups (at least
// one each), so a run at N groups offers the same load as one at one group.
// One group is the like-for-like ceiling of a real cluster, process
// boundaries included; N groups show how far independent logs on the same
// disks and cores go before the disk or the CPU, not one leader, binds.
func (r *runner) ceilingProcs(ctx context.Context, exe string, conc, batch int) (Summary, error) {
	groups := r.cfg.Groups
	dir, err := os.MkdirTemp("", "docket-ceiling-")
	if err != nil {
		return Summary{}, fmt.Errorf("ceiling dir: %w", err)
	}
	defer os.RemoveAll(dir)
	args := []string{"bench", "ceiling-node", "--dir", dir, "--groups", fmt.Sprint(groups), "--log-store", r.cfg.LogStore}
	if r.cfg.TLS {
		tlsDir := filepath.Join(dir, "tls")
		// The CA is made here, once: three nodes making it at once would race.
		if _, _, err := tlsgen.CA(tlsDir, 1); err != nil {
			return Summary{}, err
		}
		args = append(args, "--tls-dir", tlsDir)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var nodes []*ceilingNode
	defer func() {
		for _, n := range nodes {
			_ = n.in.Close() // the node shuts its servers down on EOF
		}
		for _, n := range nodes {
			waitOrKill(n.cmd, 30*time.Second)
		}
	}()
	// The three children's stderr copiers write to one writer.
	stderr := &lockedWriter{w: r.stderr}
	for i := range 3 {
		cmd := exec.CommandContext(cctx, exe, append(slices.Clone(args), "--index", fmt.Sprint(i))...)
		cmd.Stderr = stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return Summary{}, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return Summary{}, err
		}
		if err := cmd.Start(); err != nil {
			return Summary{}, fmt.Errorf("start ceiling node: %w", err)
		}
		nodes = append(nodes, &ceilingNode{cmd: cmd, in: in, out: json.NewDecoder(bufio.NewReader(out))})
	}
	cfg := make([][]raft.Server, groups)
	for i, n := range nodes {
		m, err := n.read()
		if err != nil {
			return Summary{}, err
		}
		if len(m.Addrs) != groups {
			return Summary{}, fmt.Errorf("ceiling node %d: %d addresses for %d groups", i, len(m.Addrs), groups)
		}
		for g, a := range m.Addrs {
			cfg[g] = append(cfg[g], raft.Server{ID: raft.ServerID(fmt.Sprintf("c%d", i+1)), Address: raft.ServerAddress(a)})
		}
	}
	// Bootstrap all, then wait for all: each node's answer waits for its
	// own groups' elections, which need the other nodes up.
	if err := each(nodes, func(n *ceilingNode) error { return send(n, nodeMsg{Groups: cfg}) }); err != nil {
		return Summary{}, err
	}
	if err := each(nodes, func(n *ceilingNode) error { _, err := n.read(); return err }); err != nil {
		return Summary{}, err
	}
	const idle = 3 * time.Second
	if err := each(nodes, func(n *ceilingNode) error { return send(n, nodeMsg{Idle: idle}) }); err != nil {
		return Summary{}, err
	}
	var idleCPU []float64
	for _, n := range nodes {
		m, err := n.read()
		if err != nil {
			return Summary{}, err
		}
		idleCPU = append(idleCPU, m.Idle.Seconds()/idle.Seconds())
	}
	data, err := r.ceilingEntry(batch)
	if err != nil {
		return Summary{}, err
	}
	perGroup := max(1, conc/groups)
	perNode := 0
	if r.cfg.Count > 0 {
		perNode = max(1, r.cfg.Count/3)
	}
	run := &nodeRun{Conc: perGroup, Duration: r.cfg.Duration, Count: perNode, Data: data, Items: batch}
	cpu0 := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		cpu0[i] = procCPU(n.cmd.Process.Pid)
	}
	t0 := time.Now()
	if err := each(nodes, func(n *ceilingNode) error { return send(n, nodeMsg{Run: run}) }); err != nil {
		return Summary{}, err
	}
	rec := NewRecorder(fmt.Sprintf("raft-ceiling c=%d procs=3 groups=%d", perGroup*groups, groups))
	var elapsed time.Duration
	var runCPU []float64
	for i, n := range nodes {
		m, err := n.read()
		if err != nil {
			return Summary{}, err
		}
		if m.Result == nil {
			return Summary{}, fmt.Errorf("ceiling node %d: no result", i)
		}
		rec.merge(m.Result)
		elapsed = max(elapsed, m.Result.Elapsed)
	}
	// CPU over the same wall time for every node, followers included: a
	// node that leads nothing answers at once but works as a follower
	// until the last leader's phase ends. The window includes the warmup.
	wall := time.Since(t0)
	for i, n := range nodes {
		runCPU = append(runCPU, (procCPU(n.cmd.Process.Pid)-cpu0[i]).Seconds()/wall.Seconds())
	}
	r.rep.Extra["ceiling_procs"] = map[string]any{"groups": groups, "callers_per_group": perGroup,
		"idle_cores_per_node": idleCPU, "run_cores_per_node": runCPU}
	return rec.Summarize(elapsed), nil
}

// lockedWriter serializes writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func send(n *ceilingNode, m nodeMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = n.in.Write(append(b, '\n'))
	return err
}

func each(nodes []*ceilingNode, f func(*ceilingNode) error) error {
	var errs []error
	for _, n := range nodes {
		errs = append(errs, f(n))
	}
	return errors.Join(errs...)
}

// procCPU is a child's user and system CPU time so far, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s, the
// value on Linux since 2.6); 0 where that cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// waitOrKill waits for cmd to exit, and kills it after d.
func waitOrKill(cmd *exec.Cmd, d time.Duration) {
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // its stderr already reached ours
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
	}
}
