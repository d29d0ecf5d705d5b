package jepsen

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/internal/testaddr"
)

// The controller's helpers (health, leader) and the workload's raw dials
// reach a node that runs the secure mode's flags, with the client
// certificate and the bootstrap admin token; a plaintext helper does not,
// so no fault could silently keep working on the plain path.
func Test_HelpersSpeakTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, sec, addr := mustSecureNode(ctx, t, true)
	admin := sec.Creds(RoleAdmin)
	if st, err := NodeHealth(ctx, addr, Creds{}); err == nil {
		t.Errorf("a plaintext health check of a TLS node answered %q", st)
	}
	id, err := LeaderID(ctx, []string{addr}, admin)
	if err != nil || id != "n1" {
		t.Errorf("secure leader lookup: %q, %v", id, err)
	}
	// Transfer needs the admin token, which exists once the leader created
	// the bootstrap token: poll.
	var terr error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if _, terr = TransferTo(ctx, []string{addr}, "n1", admin); terr == nil || !strings.Contains(terr.Error(), "unauthenticated") {
			break
		}
	}
	// Past authentication and authorization, the one node refuses to
	// transfer to itself: that answer proves the admin token was taken.
	if terr == nil || !strings.Contains(terr.Error(), "to itself") {
		t.Errorf("transfer with the bootstrap token: %v, want the refusal to transfer to itself", terr)
	}
	if _, err := TransferTo(ctx, []string{addr}, "n1", Creds{CA: admin.CA, Cert: admin.Cert, Key: admin.Key, Tokens: map[string]string{RoleAdmin: filepath.Join(sec.Dir, "nope")}}); err == nil {
		t.Errorf("transfer with an unreadable token file succeeded")
	}
}

// The workload's first act on a secure cluster is to check that tokens
// are enforced: a secure run against nodes without --auth must fail, not
// pass having tested nothing of the secure path.
func Test_AuthProbe(t *testing.T) {
	for _, auth := range []bool{true, false} {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		bin, sec, addr := mustSecureNode(ctx, t, auth)
		if err := sec.createTokens(ctx, []string{bin}, []string{addr}); err != nil {
			cancel()
			t.Fatal(err)
		}
		cfg := WorkloadConfig{Nodes: []string{addr}, Creds: sec.Creds(RoleProducer, RoleWorker, RoleReader)}
		prod, err := newRoleClient(ctx, cfg, RoleProducer)
		if err != nil {
			t.Fatal(err)
		}
		work, err := newRoleClient(ctx, cfg, RoleWorker)
		if err != nil {
			t.Fatal(err)
		}
		anon, err := cfg.Creds.Dial(addr, "")
		if err != nil {
			t.Fatal(err)
		}
		// Without --auth every probe runs to its deadline: keep it short.
		pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
		if !auth {
			pctx, pcancel = context.WithTimeout(ctx, 3*time.Second)
		}
		err = checkAuthEnforced(pctx, prod, work, anon)
		pcancel()
		if auth && err != nil {
			t.Errorf("--auth on: %v", err)
		}
		if !auth && !errors.Is(err, errAuthNotEnforced) {
			t.Errorf("--auth off: the probe answered %v, want errAuthNotEnforced", err)
		}
		anon.Close()
		work.Close()
		prod.Close()
		cancel()
	}
}

// mustSecureNode starts a one-node cluster on loopback with the secure
// mode's flags (without --auth when auth is false) and waits until it
// serves. The node stops when the test ends.
func mustSecureNode(ctx context.Context, t *testing.T, auth bool) (bin string, sec *Security, addr string) {
	t.Helper()
	bin = mustBuildDocket(t)
	sec, addr = startSecureNode(ctx, t, bin, auth, nil)
	return bin, sec, addr
}

// startSecureNode is mustSecureNode on the docket binary bin, with env
// added to the agent's environment (a planted build's DOCKET_PLANT).
func startSecureNode(ctx context.Context, t *testing.T, bin string, auth bool, env []string) (sec *Security, addr string) {
	t.Helper()
	dir := t.TempDir()
	sec, err := NewSecurity(ctx, bin, filepath.Join(dir, "pki"), 1)
	if err != nil {
		t.Fatal(err)
	}
	addr = testaddr.Free(t)
	flags := sec.agentArgs("n1")
	if !auth {
		flags = slices.DeleteFunc(flags, func(f string) bool { return f == "--auth" })
	}
	args := append([]string{"agent", "--id", "n1", "--data-dir", filepath.Join(dir, "n1"), "--grpc-addr", addr,
		"--raft-addr", testaddr.Free(t), "--gossip-addr", testaddr.Free(t), "--bootstrap-expect", "1"}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(sec.agentEnv(), env...)
	logf, err := os.Create(filepath.Join(dir, "n1.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	admin := sec.Creds(RoleAdmin)
	var st string
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if st, err = NodeHealth(ctx, addr, admin); err == nil && st == "SERVING" {
			break
		}
	}
	if st != "SERVING" {
		b, _ := os.ReadFile(filepath.Join(dir, "n1.log"))
		t.Fatalf("secure health: %q, %v\nnode log:\n%s", st, err, b)
	}
	return sec, addr
}
