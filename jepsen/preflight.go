package jepsen

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Tool is a command the harness runs and the Debian package that has it.
type Tool struct {
	Cmd     string
	Package string
}

// ErrMissingTool: a command a fault needs is not on PATH. The error names
// the package to install.
var ErrMissingTool = errors.New("jepsen: missing tool")

// ErrNeedsRoot: the harness needs root for namespaces, iptables and mounts.
var ErrNeedsRoot = errors.New("jepsen: needs root (network namespaces, iptables, mounts)")

var (
	toolIP       = Tool{"ip", "iproute2"}
	toolIPTables = Tool{"iptables", "iptables"}
)

// FaultTools is what each fault needs beyond the network every run builds
// (BaseTools). kill, pause and clock-offset only signal and restart
// processes; corrupt-disk edits files from Go.
var FaultTools = map[string][]Tool{
	FaultHalves:   {toolIPTables},
	FaultLeader:   {toolIPTables},
	FaultBridge:   {toolIPTables},
	FaultOneWay:   {toolIPTables},
	FaultLoss:     {toolIPTables},
	FaultLostData: {{"truncate", "coreutils"}, {"cp", "coreutils"}, {"mv", "coreutils"}, {"mkfs.ext4", "e2fsprogs"}, {"fsck.ext4", "e2fsprogs"}, {"mount", "mount"}, {"umount", "mount"}},
}

// geteuid is a seam: the tests check the order of the refusals as root too.
var geteuid = os.Geteuid

// BaseTools is what every run needs: the namespaces and the cleanup of
// leftover mounts.
var BaseTools = []Tool{toolIP, {"umount", "mount"}}

// CheckTools checks that every command faults need is on PATH, and names
// the packages of those that are not. It needs no privilege.
func CheckTools(faults []string) error {
	need := append([]Tool(nil), BaseTools...)
	for _, f := range faults {
		if !slicesContains(AllFaults, f) {
			return fmt.Errorf("jepsen: unknown fault %q (known: %s)", f, strings.Join(AllFaults, ", "))
		}
		need = append(need, FaultTools[f]...)
	}
	var missing []string
	pkgs := map[string]bool{}
	seen := map[string]bool{}
	for _, t := range need {
		if seen[t.Cmd] {
			continue
		}
		seen[t.Cmd] = true
		if _, err := exec.LookPath(t.Cmd); err != nil {
			missing = append(missing, fmt.Sprintf("%s (package %s)", t.Cmd, t.Package))
			pkgs[t.Package] = true
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var ps []string
	for p := range pkgs {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return fmt.Errorf("%w: %s; install with: apt-get install -y %s", ErrMissingTool,
		strings.Join(missing, ", "), strings.Join(ps, " "))
}

// Preflight refuses a run that could not inject its faults. First the
// tools (without privilege, so that a missing tool is named even to a
// non-root user), then root, then a trial of each fault's commands in a
// throwaway namespace, removed afterwards: an iptables without the
// statistic match, or a kernel without loop devices, fails here and not as
// a silently missing fault window.
func Preflight(ctx context.Context, faults []string) error {
	if err := CheckTools(faults); err != nil {
		return err
	}
	if geteuid() != 0 {
		return ErrNeedsRoot
	}
	var b [3]byte
	_, _ = crand.Read(b[:])
	ns := "dj" + hex.EncodeToString(b[:]) + "-pf" // matches prefixRE: a crash leaves nothing CleanLeftovers misses
	if _, err := run(ctx, "ip", "netns", "add", ns); err != nil {
		return fmt.Errorf("preflight: network namespace: %w", err)
	}
	defer func() { _, _ = run(context.Background(), "ip", "netns", "del", ns) }()
	trials := map[string][][]string{}
	ipt := func(args ...string) []string {
		return append([]string{"ip", "netns", "exec", ns, "iptables", "-w", "5"}, args...)
	}
	drop := [][]string{ipt("-A", "INPUT", "-s", nodeIP(1), "-j", "DROP"), ipt("-F", "INPUT")}
	for _, f := range []string{FaultHalves, FaultLeader, FaultBridge, FaultOneWay} {
		trials[f] = drop
	}
	trials[FaultLoss] = [][]string{ipt("-A", "INPUT", "-s", subnetPrefix+"0/24", "-m", "statistic", "--mode", "random",
		"--probability", "0.200", "-j", "DROP"), ipt("-F", "INPUT")}
	for _, f := range faults {
		for _, s := range trials[f] {
			if _, err := run(ctx, s[0], s[1:]...); err != nil {
				return fmt.Errorf("preflight: fault %s cannot be applied: %w", f, err)
			}
		}
		if f == FaultLostData {
			if err := trialLoop(ctx); err != nil {
				return fmt.Errorf("preflight: fault %s cannot be applied: %w", f, err)
			}
		}
	}
	return nil
}

// trialLoop formats and mounts a small loop image, as setupLoop does.
func trialLoop(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "docket-jepsen-pf-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	img, mnt := filepath.Join(dir, "img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return err
	}
	for _, s := range [][]string{{"truncate", "-s", "16M", img}, {"mkfs.ext4", "-q", "-F", img}, {"mount", "-o", "loop,data=writeback", img, mnt}} {
		if _, err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	_, err = run(ctx, "umount", mnt)
	return err
}
