package jepsen

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Subnet layout: the bridge lives in its own namespace; node i (1-based)
// is 10.77.0.(10+i); the control namespace, where the workload runs, is
// 10.77.0.2. The subnet exists only inside these namespaces, none of which
// has a default route, so no packet can leave the machine.
const (
	subnetPrefix = "10.77.0."
	ctlIP        = subnetPrefix + "2"
	grpcPort     = 7401
	raftPort     = 7501
)

// prefixRE matches every namespace this harness ever creates, so that a
// run can remove leftovers of crashed runs (and only those).
var prefixRE = regexp.MustCompile(`^dj[0-9a-f]{6}-`)

// Net is the run's set of namespaces.
type Net struct {
	Prefix string // e.g. "dj1a2b3c-"
	N      int
	log    *slog.Logger
}

func nodeIP(i int) string { return subnetPrefix + strconv.Itoa(10+i) }

// NodeNS is the namespace of node i (1-based).
func (n *Net) NodeNS(i int) string { return fmt.Sprintf("%sn%d", n.Prefix, i) }

// CtlNS is the control namespace.
func (n *Net) CtlNS() string { return n.Prefix + "ctl" }
func (n *Net) brNS() string  { return n.Prefix + "br" }

// run runs a command with a bounded time and returns its combined output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

func (n *Net) inNS(ctx context.Context, ns string, args ...string) error {
	_, err := run(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...)
	return err
}

// CleanLeftovers kills the processes in, and deletes, every namespace a
// harness run left behind.
func CleanLeftovers(ctx context.Context, log *slog.Logger) {
	cleanMounts(ctx, log)
	out, err := run(ctx, "ip", "netns", "list")
	if err != nil {
		log.Warn("list namespaces", "err", err)
		return
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !prefixRE.MatchString(f[0]) {
			continue
		}
		killNS(ctx, f[0])
		if _, err := run(ctx, "ip", "netns", "del", f[0]); err != nil {
			log.Warn("delete leftover namespace", "ns", f[0], "err", err)
		} else {
			log.Info("deleted leftover namespace", "ns", f[0])
		}
	}
}

// cleanMounts lazily unmounts the loop-mounted data directories that a
// killed run left behind (work directories are /tmp/docket-jepsen-*).
func cleanMounts(ctx context.Context, log *slog.Logger) {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.Contains(f[1], "/docket-jepsen-") {
			if _, err := run(ctx, "umount", "-l", f[1]); err != nil {
				log.Warn("unmount leftover", "dir", f[1], "err", err)
			} else {
				log.Info("unmounted leftover", "dir", f[1])
			}
		}
	}
}

// killNS sends SIGKILL (after SIGCONT) to every process inside ns.
func killNS(ctx context.Context, ns string) {
	out, _ := run(ctx, "ip", "netns", "pids", ns)
	for _, p := range strings.Fields(out) {
		if pid, err := strconv.Atoi(p); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGCONT)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// Setup creates the bridge, node and control namespaces and wires them.
func (n *Net) Setup(ctx context.Context) error {
	br := n.brNS()
	steps := [][]string{{"ip", "netns", "add", br}, {"ip", "-n", br, "link", "set", "lo", "up"},
		{"ip", "-n", br, "link", "add", "br0", "type", "bridge"}, {"ip", "-n", br, "link", "set", "br0", "up"}}
	add := func(ns, ip string, idx string) {
		host := fmt.Sprintf("%sv%s", n.Prefix, idx) // <= 15 chars
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			[]string{"ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", host},
			[]string{"ip", "-n", ns, "link", "set", host, "netns", br},
			[]string{"ip", "-n", br, "link", "set", host, "master", "br0"},
			[]string{"ip", "-n", br, "link", "set", host, "up"},
			[]string{"ip", "-n", ns, "addr", "add", ip + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"})
	}
	add(n.CtlNS(), ctlIP, "c")
	for i := 1; i <= n.N; i++ {
		add(n.NodeNS(i), nodeIP(i), strconv.Itoa(i))
	}
	for _, s := range steps {
		if _, err := run(ctx, s[0], s[1:]...); err != nil {
			return fmt.Errorf("netns setup: %w", err)
		}
	}
	return nil
}

// Teardown kills everything in the run's namespaces and deletes them.
func (n *Net) Teardown(ctx context.Context) {
	nss := []string{n.CtlNS(), n.brNS()}
	for i := 1; i <= n.N; i++ {
		nss = append(nss, n.NodeNS(i))
	}
	for _, ns := range nss {
		killNS(ctx, ns)
		if _, err := run(ctx, "ip", "netns", "del", ns); err != nil {
			n.log.Debug("teardown", "ns", ns, "err", err)
		}
	}
}

// ipt runs iptables in node i's namespace.
func (n *Net) ipt(ctx context.Context, i int, args ...string) error {
	return n.inNS(ctx, n.NodeNS(i), append([]string{"iptables", "-w", "5"}, args...)...)
}

// Rules is the set of filter rules one fault added, so that its heal
// removes exactly those and leaves the rules of a fault that overlaps it.
// iptables -A appends a duplicate when two faults add the same rule, and
// -D deletes one copy, so overlapping identical rules heal independently.
type Rules struct {
	net   *Net
	added []rule
}

type rule struct {
	node int
	spec []string // after -A/-D INPUT
}

// Rules starts an empty rule set on n.
func (n *Net) Rules() *Rules { return &Rules{net: n} }

func (r *Rules) add(ctx context.Context, i int, spec ...string) error {
	if err := r.net.ipt(ctx, i, append([]string{"-A", "INPUT"}, spec...)...); err != nil {
		return err
	}
	r.added = append(r.added, rule{i, spec})
	return nil
}

// Drop makes node i drop packets from node j (one way: j's packets into i).
func (r *Rules) Drop(ctx context.Context, i, j int) error {
	return r.add(ctx, i, "-s", nodeIP(j), "-j", "DROP")
}

// Cut drops traffic both ways between i and j.
func (r *Rules) Cut(ctx context.Context, i, j int) error {
	if err := r.Drop(ctx, i, j); err != nil {
		return err
	}
	return r.Drop(ctx, j, i)
}

// Loss makes node i drop a fraction p of all incoming packets from peers
// and clients, with the iptables statistic match.
func (r *Rules) Loss(ctx context.Context, i int, p float64) error {
	return r.add(ctx, i, "-s", subnetPrefix+"0/24", "-m", "statistic", "--mode", "random",
		"--probability", strconv.FormatFloat(p, 'f', 3, 64), "-j", "DROP")
}

// Heal deletes the rules this set added, newest first, and forgets them;
// it goes on past a failed delete and returns the first error.
func (r *Rules) Heal(ctx context.Context) error {
	var first error
	for k := len(r.added) - 1; k >= 0; k-- {
		ru := r.added[k]
		if err := r.net.ipt(ctx, ru.node, append([]string{"-D", "INPUT"}, ru.spec...)...); err != nil && first == nil {
			first = fmt.Errorf("heal rule on n%d: %w", ru.node, err)
		}
	}
	r.added = nil
	return first
}

// Heal flushes every node's filter rules: the final heal, and the fallback
// when a fault's own heal failed.
func (n *Net) Heal(ctx context.Context) error {
	var first error
	for i := 1; i <= n.N; i++ {
		if err := n.ipt(ctx, i, "-F", "INPUT"); err != nil && first == nil {
			first = err
		}
	}
	return first
}
