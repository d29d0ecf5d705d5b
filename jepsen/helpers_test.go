package jepsen

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// freeAddr is a loopback address with a port nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// The controller's helpers (health, leader) and the workload's raw dials
// reach a node that runs the secure mode's flags, with the client
// certificate and the bootstrap admin token; a plaintext helper does not,
// so no fault could silently keep working on the plain path.
func Test_HelpersSpeakTLS(t *testing.T) {
	bin := mustBuildDocket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	sec, err := NewSecurity(ctx, bin, filepath.Join(dir, "pki"), 1)
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	args := append([]string{"agent", "--id", "n1", "--data-dir", filepath.Join(dir, "n1"), "--grpc-addr", addr,
		"--raft-addr", freeAddr(t), "--bootstrap-expect", "1"}, sec.agentArgs("n1")...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = sec.agentEnv()
	logf, err := os.Create(filepath.Join(dir, "n1.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

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
	if _, err := TransferTo(ctx, []string{addr}, "n1", Creds{CA: admin.CA, Cert: admin.Cert, Key: admin.Key, Tokens: map[string]string{RoleAdmin: filepath.Join(dir, "nope")}}); err == nil {
		t.Errorf("transfer with an unreadable token file succeeded")
	}
}
