package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"encoding/json"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/client"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// View is the cluster's configuration as its leader reports it (Status):
// what the membership and rolling faults judge their heals by.
type View struct {
	Leader    string            `json:"leader"`
	Term      uint64            `json:"term"`
	Voters    []string          `json:"voters"`
	NonVoters []string          `json:"non_voters,omitempty"`
	Enabled   uint32            `json:"enabled_level"`         // the level the cluster latched
	Levels    map[string]uint32 `json:"levels,omitempty"`      // each server's announced build level
	Health    map[string]string `json:"health,omitempty"`      // each server's gossip health
	Probe     string            `json:"token_probe,omitempty"` // GateProbe's answer, when asked
}

func (v View) String() string {
	return fmt.Sprintf("leader %s, voters %v, non-voters %v, level %d", v.Leader, v.Voters, v.NonVoters, v.Enabled)
}

// Has reports whether id is in the configuration.
func (v View) Has(id string) bool {
	return slices.Contains(v.Voters, id) || slices.Contains(v.NonVoters, id)
}

// Probe answers of GateProbe.
const (
	ProbeRefused  = "refused: feature disabled"
	ProbeAccepted = "accepted"
)

// ProbeLevel is the feature level of the probe's command (SetKeyLimit,
// fsm.LevelFairQueues). A level may add no command at all (17 to 22
// change only what apply writes), so an older build at or above this
// level accepts the probe before the upgrade as after it.
const ProbeLevel = 16

// ProbeBefore is the probe's answer expected while a server still runs
// the older build, whose cluster latched level enabled.
func ProbeBefore(enabled uint32) string {
	if enabled >= ProbeLevel {
		return ProbeAccepted
	}
	return ProbeRefused
}

// ClusterView asks every node for its Status and returns the answer of
// the node that leads with the highest term. With probe, it also sets a
// key's override (SetKeyLimit), the command type of the newest level the
// harness knows (fair queues, 16): on a cluster below that level it must
// be refused (ProbeRefused), at it accepted (ProbeAccepted). A token (level
// 4) was the probe until the older binary was a real release above that
// level: its tokens were created before the upgrade, and the run reported
// a finding that was none. The rolling upgrade runs without --auth, where
// the call needs no token.
func ClusterView(ctx context.Context, nodes []string, cr Creds, probe bool) (View, error) {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	opts, err := cr.ClientOptions(RoleAdmin)
	if err != nil {
		return View{}, fmt.Errorf("view: %w", err)
	}
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl, err := client.New(c, nodes, append(opts, client.WithLogger(quiet))...)
	if err != nil {
		return View{}, fmt.Errorf("view: %w", err)
	}
	defer cl.Close()
	var best *docketv1.StatusResponse
	for _, a := range nodes {
		sc, cancel := context.WithTimeout(c, 2*time.Second)
		st, err := cl.NodeStatus(sc, a, false)
		cancel()
		if err == nil && st.GetState() == "Leader" && (best == nil || st.GetTerm() >= best.GetTerm()) {
			best = st
		}
	}
	if best == nil {
		return View{}, errors.New("view: no node says it leads")
	}
	v := View{Leader: best.GetNodeId(), Term: best.GetTerm(), Enabled: best.GetEnabledFeatureLevel(),
		Levels: map[string]uint32{}, Health: map[string]string{}}
	for _, s := range best.GetServers() {
		if s.GetSuffrage() == "voter" {
			v.Voters = append(v.Voters, s.GetId())
		} else {
			v.NonVoters = append(v.NonVoters, s.GetId())
		}
		v.Levels[s.GetId()] = s.GetFeatureLevel()
		v.Health[s.GetId()] = s.GetHealth()
	}
	slices.Sort(v.Voters)
	slices.Sort(v.NonVoters)
	if probe {
		one := uint32(1)
		_, err := cl.SetKeyLimit(c, "jepsen-gate-probe", Tenant, "probe", client.KeyLimit{MaxRunning: &one})
		switch {
		case err == nil:
			v.Probe = ProbeAccepted
		case errors.Is(err, client.ErrFeatureDisabled), status.Code(err) == codes.Unimplemented:
			// An older release that predates the call does not know it at
			// all: refused as surely as by the level's gate.
			v.Probe = ProbeRefused
		default:
			v.Probe = "error: " + err.Error()
		}
	}
	return v, nil
}

// LeaveNode asks the node at addr to leave the cluster for good (docket
// cluster leave): it hands leadership over, leaves the configuration and
// gossip, and its agent stops.
func LeaveNode(ctx context.Context, addr string, cr Creds) error {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	opts, err := cr.ClientOptions(RoleAdmin)
	if err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cl, err := client.New(c, []string{addr}, append(opts, client.WithLogger(quiet))...)
	if err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	defer cl.Close()
	return cl.Leave(c, addr)
}

// View asks the cluster for its configuration from the control namespace
// (this binary's "view" verb).
func (c *Cluster) View(ctx context.Context, self string, probe bool) (View, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	args := []string{"netns", "exec", c.Net.CtlNS(), self, "view", "--nodes", strings.Join(c.GRPCAddrs(), ",")}
	if probe {
		args = append(args, "--probe")
	}
	out, err := exec.CommandContext(ctx, "ip", append(args, c.adminCreds().Args()...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return View{}, fmt.Errorf("view: %w", err)
	}
	var v View
	if err := json.Unmarshal(out, &v); err != nil {
		return View{}, fmt.Errorf("view: %w", err)
	}
	return v, nil
}

// Leave makes node x leave the cluster, from the control namespace (this
// binary's "leave" verb).
func (c *Cluster) Leave(ctx context.Context, self string, x *Node) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	addr := fmt.Sprintf("%s:%d", nodeIP(x.I), grpcPort)
	args := append([]string{"netns", "exec", c.Net.CtlNS(), self, "leave", "--addr", addr}, c.adminCreds().Args()...)
	if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("leave %s: %w: %s", x.ID, err, strings.TrimSpace(string(out)))
	}
	return nil
}
