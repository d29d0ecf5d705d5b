package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cmd/docket/dashboard"
	"github.com/dockethq/docket/cmd/docket/localcluster"
	"github.com/dockethq/docket/internal/testaddr"
)

// devRun is one `docket dev` running in this process (its nodes are
// children running this test binary as docket, envRunMain).
type devRun struct {
	out  *logBuffer
	stop func() error
}

// freeBase finds a base port whose gossip (base-99..-100+n), gRPC
// (base+1..n), Raft (base+101..100+n), metrics (base+201..200+n) and
// dashboard (base+301..300+n) ports are free now on 127.0.0.1, for TCP
// and UDP. It picks below testaddr.Low, where no testaddr.Free port of a
// test running beside it can be.
func freeBase(t *testing.T, n int) int {
	t.Helper()
	const low, high = 10100, testaddr.Low - 400
	for try := 0; try < 200; try++ {
		base := low + rand.IntN(high-low)
		ok := true
		for i := 1; i <= n && ok; i++ {
			for _, off := range []int{-100, 0, 100, 200, 300} {
				if !testaddr.IsFree(fmt.Sprintf("127.0.0.1:%d", base+off+i)) {
					ok = false
					break
				}
			}
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free base port")
	return 0
}

// startDev runs `docket dev args...` until the cluster is ready; stop
// ends it (as Ctrl-C does) and waits for it.
func startDev(t *testing.T, args ...string) *devRun {
	t.Helper()
	t.Setenv(envRunMain, "1")
	ctx, cancel := context.WithCancel(context.Background())
	out := &logBuffer{}
	done := make(chan error, 1)
	go func() { done <- runDev(ctx, args, out, out) }()
	var once bool
	stop := func() error {
		if once {
			return nil
		}
		once = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { _ = stop() })
	deadline := time.After(90 * time.Second)
	for !out.has("Ctrl-C stops the cluster") {
		select {
		case err := <-done:
			once = true
			t.Fatalf("docket dev ended before it was ready: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("docket dev not ready in 90 s:\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return &devRun{out: out, stop: stop}
}

// sourced runs `. DIR/env && docket args...` in a fresh shell with none
// of this process's DOCKET_ variables, as a user's other terminal would.
func sourced(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script := `. "$1" && shift && exec "$0" "$@"`
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, exe, filepath.Join(dir, DevEnvFile)}, args...)...)
	cmd.Env = []string{envRunMain + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func devToken(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, localcluster.TokenFileName))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Test_DevSecureByDefault: `docket dev` without flags runs TLS and auth;
// a plaintext client and a TLS client without a token are refused; the
// env file it writes (0600) is all another shell needs; a restart on the
// same data dir keeps the CA, the token and the data. Before dev was
// secure, the plaintext client was answered and the env file was missing.
func Test_DevSecureByDefault(t *testing.T) {
	dir := t.TempDir()
	base := freeBase(t, 3)
	dev := startDev(t, "--data-dir", dir, "--base-port", fmt.Sprint(base))
	addrs := []string{fmt.Sprintf("127.0.0.1:%d", base+1), fmt.Sprintf("127.0.0.1:%d", base+2), fmt.Sprintf("127.0.0.1:%d", base+3)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	plain, err := client.New(pctx, addrs)
	if err == nil {
		_, err = plain.Stats(pctx, "", "")
		_ = plain.Close()
	}
	pcancel()
	if err == nil {
		t.Fatal("a plaintext client was answered")
	}

	tok := devToken(t, dir)
	for _, want := range []string{"admin token: " + tok, "source " + filepath.Join(dir, DevEnvFile), "DOCKET_TLS_CA="} {
		if !dev.out.has(want) {
			t.Fatalf("dev output lacks %q:\n%s", want, dev.out.String())
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, DevEnvFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("env file: %v %v, want mode 0600", fi, err)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		b, err := os.ReadFile(filepath.Join(dir, n+".log"))
		if err != nil || strings.Contains(string(b), tok) {
			t.Fatalf("%s's log holds the admin token (or is missing: %v)", n, err)
		}
		// Gossip is encrypted too: the agent warns when it is plain.
		if strings.Contains(string(b), "gossip is plain") {
			t.Fatalf("%s gossips in plain text in a secure dev cluster", n)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, localcluster.GossipKeyFileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("gossip key file: %v %v, want mode 0600", fi, err)
	}

	ca := filepath.Join(dir, "tls", "docket-ca.pem")
	checkDevDashboard(t, dev, base, ca, tok)
	checkDevMetrics(t, dev, dir, ca, tok)
	anon, err := client.New(ctx, addrs, client.WithTLS(ca, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err := anon.EnqueueOne(ctx, "jobs", []byte("anon")); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("enqueue over TLS without a token: %v, want unauthenticated", err)
	}

	if out, err := sourced(t, dir, "enqueue", "jobs", "hello"); err != nil || !strings.Contains(out, "PENDING") {
		t.Fatalf("enqueue with the env file: %v\n%s", err, out)
	}
	if out, err := sourced(t, dir, "stats"); err != nil || !regexp.MustCompile(`jobs\s+default\s+active\s+1\s`).MatchString(out) {
		t.Fatalf("stats with the env file: %v\n%s", err, out)
	}

	if err := dev.stop(); err != nil {
		t.Fatalf("stop dev: %v\n%s", err, dev.out.String())
	}
	dev = startDev(t, "--data-dir", dir, "--base-port", fmt.Sprint(base))
	if got := devToken(t, dir); got != tok || !dev.out.has("admin token: "+tok) {
		t.Fatalf("restart minted a new token (%q, was %q):\n%s", got, tok, dev.out.String())
	}
	if out, err := sourced(t, dir, "enqueue", "jobs", "again"); err != nil {
		t.Fatalf("enqueue after a restart: %v\n%s", err, out)
	}
	if out, err := sourced(t, dir, "stats"); err != nil || !regexp.MustCompile(`jobs\s+default\s+active\s+2\s`).MatchString(out) {
		t.Fatalf("stats after a restart: %v\n%s", err, out)
	}
}

// Test_DevInsecureIsPlain: --insecure is today's plaintext cluster with
// no token, and its env file clears a secure cluster's variables. It also
// runs on --log-store wal, which reaches every node.
func Test_DevInsecureIsPlain(t *testing.T) {
	dir := t.TempDir()
	base := freeBase(t, 3)
	dev := startDev(t, "--insecure", "--log-store", "wal", "--data-dir", dir, "--base-port", fmt.Sprint(base))
	for _, id := range []string{"n1", "n2", "n3"} {
		if _, err := os.Stat(filepath.Join(dir, id, "raft-wal")); err != nil {
			t.Fatalf("%s is not on the wal: %v", id, err)
		}
		if _, err := os.Stat(filepath.Join(dir, id, "raft.db")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s wrote a raft.db on --log-store wal: %v", id, err)
		}
	}
	if !dev.out.has("INSECURE") {
		t.Fatalf("no warning:\n%s", dev.out.String())
	}
	checkDevMetrics(t, dev, dir, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{fmt.Sprintf("127.0.0.1:%d", base+1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.EnqueueOne(ctx, "jobs", []byte("plain")); err != nil {
		t.Fatalf("plaintext enqueue without a token: %v", err)
	}
	env, err := os.ReadFile(filepath.Join(dir, DevEnvFile))
	if err != nil || strings.Contains(string(env), "export DOCKET_TOKEN") || !strings.Contains(string(env), "unset DOCKET_TLS_CA") {
		t.Fatalf("env file: %v\n%s", err, env)
	}
	if out, err := sourced(t, dir, "stats"); err != nil || !regexp.MustCompile(`jobs\s+default\s+active\s+1\s`).MatchString(out) {
		t.Fatalf("stats with the env file: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "tls")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("--insecure made certificates: %v", err)
	}
}

// benchOps reads a `docket bench --json` report and returns its
// first op's successes and errors.
func benchOps(t *testing.T, out string) (count, errs uint64) {
	t.Helper()
	var rep struct {
		Ops []struct {
			Count  uint64 `json:"count"`
			Errors uint64 `json:"errors"`
		} `json:"ops"`
	}
	i := strings.Index(out, "{")
	if i < 0 || json.Unmarshal([]byte(out[i:]), &rep) != nil || len(rep.Ops) == 0 {
		t.Fatalf("bench report: %s", out)
	}
	return rep.Ops[0].Count, rep.Ops[0].Errors
}

// Test_BenchAgainstSecureDev: `docket bench --addr` reaches the secure dev
// cluster with the env file's CA and token, and its calls fail without a
// token. Before bench took a token, every call was unauthenticated.
func Test_BenchAgainstSecureDev(t *testing.T) {
	dir := t.TempDir()
	base := freeBase(t, 3)
	startDev(t, "--data-dir", dir, "--base-port", fmt.Sprint(base))
	addr := fmt.Sprintf("127.0.0.1:%d", base+1)
	args := []string{"bench", "--addr", addr, "--workload", "enqueue", "-c", "2", "--count", "50", "--duration", "3s", "--ceiling=false", "--json"}
	out, err := sourced(t, dir, args...)
	if err != nil {
		t.Fatalf("bench with the env file: %v\n%s", err, out)
	}
	if n, e := benchOps(t, out); n == 0 || e != 0 {
		t.Fatalf("bench with the env file: %d ok, %d errors\n%s", n, e, out)
	}
	tok := devToken(t, dir)
	if strings.Contains(out, tok) {
		t.Fatal("the report shows the token")
	}
	// More callers than leases: each caller owns at least one lease. A
	// caller left without one used to end the run before any heartbeat.
	hb := []string{"bench", "--addr", addr, "--workload", "heartbeat", "--leases", "3", "-c", "8", "--duration", "1s", "--ceiling=false", "--json"}
	out, err = sourced(t, dir, hb...)
	if n, e := benchOps(t, out); err != nil || n == 0 || e != 0 {
		t.Fatalf("bench heartbeat, 8 callers and 3 leases: %v, %d ok, %d errors\n%s", err, n, e, out)
	}
	t.Setenv(envToken, "")
	var stdout, stderr logBuffer
	err = run(testCtx(t), append(args, "--tls-ca", filepath.Join(dir, "tls", "docket-ca.pem")), &stdout, &stderr)
	if err == nil {
		if n, _ := benchOps(t, stdout.String()); n != 0 {
			t.Fatalf("bench without a token enqueued %d tasks", n)
		}
	}
	stdout = logBuffer{}
	err = run(testCtx(t), append(args, "--tls-ca", filepath.Join(dir, "tls", "docket-ca.pem"), "--token", tok), &stdout, &stderr)
	if n, e := benchOps(t, stdout.String()); err != nil || n == 0 || e != 0 || strings.Contains(stdout.String(), tok) {
		t.Fatalf("bench --token: %v, %d ok, %d errors\n%s", err, n, e, stdout.String())
	}
}

// checkDevDashboard: dev prints each node's dashboard URL, and the
// dashboard serves HTTPS with the cluster's CA, asks for a login, and
// keeps the token in a Secure, HttpOnly, SameSite=Strict cookie.
func checkDevDashboard(t *testing.T, dev *devRun, base int, caFile, tok string) {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	hc := &http.Client{Timeout: 10 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: certs.ServerName}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i := 1; i <= 3; i++ {
		url := fmt.Sprintf("https://127.0.0.1:%d/", base+300+i)
		if !dev.out.has(fmt.Sprintf("n%d  dashboard %s", i, url)) {
			t.Fatalf("dev output lacks n%d's dashboard %s:\n%s", i, url, dev.out.String())
		}
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatalf("dashboard %s: %v", url, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Fatalf("dashboard %s without a token: %d to %q, want 303 to /login", url, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	resp, err := hc.PostForm(fmt.Sprintf("https://127.0.0.1:%d/login", base+301), neturl.Values{"token": {tok}})
	if err != nil {
		t.Fatalf("dashboard login: %v", err)
	}
	_ = resp.Body.Close()
	var c *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == dashboard.CookieName {
			c = k
		}
	}
	if resp.StatusCode != http.StatusSeeOther || c == nil || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		// The cookie's value is the admin token: its attributes only.
		secure, httpOnly, sameSite := c != nil && c.Secure, c != nil && c.HttpOnly, c != nil && c.SameSite == http.SameSiteStrictMode
		t.Fatalf("dashboard login over HTTPS: %d, cookie set %v, Secure %v, HttpOnly %v, SameSite=Strict %v; want 303 and all", resp.StatusCode, c != nil, secure, httpOnly, sameSite)
	}
}
