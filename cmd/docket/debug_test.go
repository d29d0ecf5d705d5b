package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cmd/docket/tlsgen"
	"github.com/dockethq/docket/internal/testaddr"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/transport"
)

// Test_DebugServerServesMetrics: --debug-addr serves the registry on
// /metrics and the profiles on /debug/pprof/.
func Test_DebugServerServesMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "docket_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	addr, stop, err := serveDebug("127.0.0.1:0", reg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for path, want := range map[string]string{"/metrics": "docket_test_total 3", "/debug/pprof/": "goroutine"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("GET %s: %d, %v; body lacks %q", path, resp.StatusCode, err, want)
		}
	}
}

// debugPKI writes a CA and a server certificate, and loads them as an
// agent does.
func debugPKI(t *testing.T) (caPath string, r *certs.Reloader) {
	t.Helper()
	dir := t.TempDir()
	ca, _, err := tlsgen.CA(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := tlsgen.Cert(tlsgen.CertOptions{Dir: dir, Name: "n1", Server: true, Days: 1})
	if err != nil {
		t.Fatal(err)
	}
	r, err = certs.Load(certs.Files{CA: ca, Cert: crt, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ca, r
}

// httpsGet GETs url trusting caPath, with secret as a bearer token unless
// empty, and returns the status and body.
func httpsGet(t *testing.T, caPath, url, secret string) (int, string) {
	t.Helper()
	pem, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Test_DebugServerWithTLSAndTokens: the debug server of an agent with TLS
// and --auth refuses plain HTTP, a request without a token, an unknown,
// revoked or expired token and one without the role or over one tenant
// only, and answers an admin token.
// Against the old server (plain HTTP, no token) the plain GET was
// answered with the metrics.
func Test_DebugServerWithTLSAndTokens(t *testing.T) {
	const boot = "debug-bootstrap-secret"
	nodes := startClusterAPI(t, 1, func(c *cluster.Config) { c.BootstrapSecret = boot }, transport.Config{Auth: true})
	ctx := ctxT(t, 20*time.Second)
	admin := mustClientWith(t, addrsOf(nodes), client.WithToken(boot))
	mint := func(roles ...string) *pb.CreateTokenResponse {
		var tok *pb.CreateTokenResponse
		testwait.For(t, 10*time.Second, "a token", func() bool {
			var err error
			tok, err = admin.CreateToken(ctx, &pb.CreateTokenRequest{Name: "d", Roles: roles, Tenants: []string{"*"}})
			return err == nil
		})
		return tok
	}
	reader, producer, revoked := mint(pb.RoleReader), mint(pb.RoleProducer, pb.RoleWorker), mint(pb.RoleAdmin)
	if err := admin.RevokeToken(ctx, revoked.GetAccessor()); err != nil {
		t.Fatal(err)
	}
	tenantAdmin, err := admin.CreateToken(ctx, &pb.CreateTokenRequest{Name: "a", Roles: []string{pb.RoleAdmin}, Tenants: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	expired, err := admin.CreateToken(ctx, &pb.CreateTokenRequest{Name: "e", Roles: []string{pb.RoleAdmin}, Tenants: []string{"*"}, TtlNs: int64(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "docket_test_total", Help: "test"})
	reg.MustRegister(c)
	ca, r := debugPKI(t)
	guard := &debugGuard{tls: r}
	addr, stop, err := serveDebug("127.0.0.1:0", reg, slog.New(slog.DiscardHandler), guard)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	metrics, cmdline := "https://"+addr+"/metrics", "https://"+addr+"/debug/pprof/cmdline"

	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "docket_test_total") {
			t.Fatalf("plain HTTP answered %d: %.200s", resp.StatusCode, body)
		}
	}
	if code, _ := httpsGet(t, ca, metrics, boot); code != http.StatusServiceUnavailable {
		t.Fatalf("before the node is up: %d, want 503", code)
	}
	guard.setNode(nodes[0].node)

	for _, tc := range []struct {
		name, url, secret string
		want              int
	}{
		{"no token", metrics, "", http.StatusUnauthorized},
		{"unknown token", metrics, "not-a-token", http.StatusUnauthorized},
		{"revoked admin token", cmdline, revoked.GetSecret(), http.StatusUnauthorized},
		{"expired admin token", cmdline, expired.GetSecret(), http.StatusUnauthorized},
		{"producer and worker", metrics, producer.GetSecret(), http.StatusForbidden},
		{"admin of one tenant", cmdline, tenantAdmin.GetSecret(), http.StatusForbidden},
		{"reader on profiles", cmdline, reader.GetSecret(), http.StatusForbidden},
		{"reader on metrics", metrics, reader.GetSecret(), http.StatusOK},
		{"admin on metrics", metrics, boot, http.StatusOK},
		{"admin on profiles", cmdline, boot, http.StatusOK},
	} {
		code, body := httpsGet(t, ca, tc.url, tc.secret)
		if code != tc.want {
			t.Errorf("%s: %d, want %d (%.100s)", tc.name, code, tc.want, body)
		}
		if code != http.StatusOK && strings.Contains(body, "docket_test_total") {
			t.Errorf("%s: refused, yet the body holds the metrics", tc.name)
		}
	}
}

// Test_AgentDebugAddrBeyondLoopback: a non-loopback --debug-addr is
// refused at start, before anything binds, unless the agent runs both
// TLS and --auth (then checkDebugAddr lets it through).
func Test_AgentDebugAddrBeyondLoopback(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := tlsgen.CA(dir, 1); err != nil {
		t.Fatal(err)
	}
	crt, key, err := tlsgen.Cert(tlsgen.CertOptions{Dir: dir, Name: "n1", Server: true, Days: 1})
	if err != nil {
		t.Fatal(err)
	}
	tlsArgs := []string{"--tls-ca", filepath.Join(dir, tlsgen.CAFile), "--tls-cert", crt, "--tls-key", key}
	for name, extra := range map[string][]string{
		"plain":         nil,
		"auth only":     {"--auth"},
		"TLS only":      tlsArgs,
		"TLS, no token": append([]string{"--tls-client-auth", "require"}, tlsArgs...),
	} {
		args := append([]string{"agent", "--id", "x", "--data-dir", t.TempDir(), "--debug-addr", "10.1.2.3:7800"}, extra...)
		err := run(testCtx(t), args, io.Discard, io.Discard)
		if !errors.Is(err, errDebugNotLoopback) || !errors.Is(err, errUsage) {
			t.Errorf("%s: %v, want errDebugNotLoopback", name, err)
		}
	}
	if err := checkDebugAddr("10.1.2.3:7800", true); err != nil {
		t.Errorf("TLS and --auth on: %v", err)
	}
}

// Test_AgentDebugServedWithTLSAndToken: `docket agent` with TLS and --auth
// serves its debug server on a loopback address over HTTPS with the node's
// certificate, and asks for the token. Before, the same agent served it in
// plain HTTP to anyone.
func Test_AgentDebugServedWithTLSAndToken(t *testing.T) {
	dir := t.TempDir()
	ca, _, err := tlsgen.CA(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := tlsgen.Cert(tlsgen.CertOptions{Dir: dir, Name: "n1", Server: true, Days: 1})
	if err != nil {
		t.Fatal(err)
	}
	const boot = "agent-debug-bootstrap"
	tokFile := filepath.Join(dir, "boot.token")
	if err := os.WriteFile(tokFile, []byte(boot), 0o600); err != nil {
		t.Fatal(err)
	}
	debugAddr := testaddr.Free(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"agent", "--id", "n1", "--data-dir", filepath.Join(dir, "n1"), "--bootstrap-expect", "1",
			"--grpc-addr", testaddr.Free(t), "--raft-addr", testaddr.Free(t), "--gossip-addr", testaddr.Free(t), "--ballast-size", "0", "--log-level", "warn",
			"--tls-ca", ca, "--tls-cert", crt, "--tls-key", key, "--auth", "--bootstrap-token-file", tokFile,
			"--debug-addr", debugAddr}, io.Discard, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	url := "https://" + debugAddr + "/debug/pprof/cmdline"
	testwait.For(t, 20*time.Second, "the debug server to take the bootstrap token", func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("agent ended: %v", err)
		default:
		}
		c, err := net.DialTimeout("tcp", debugAddr, time.Second)
		if err != nil {
			return false
		}
		_ = c.Close()
		code, _ := httpsGet(t, ca, url, boot)
		return code == http.StatusOK
	})
	if code, _ := httpsGet(t, ca, url, ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", code)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + debugAddr + "/debug/pprof/cmdline")
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered 200")
		}
	}
}

// Test_ProfilesOnlyOnLoopback: "metrics may be scraped from the
// network, profiles may not". A debug address beyond loopback (allowed
// with TLS and --auth) serves /metrics alone.
func Test_ProfilesOnlyOnLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7800": true, "[::1]:7800": true, "localhost:7800": true, "127.0.0.2:1": true,
		"10.0.0.1:7800": false, "0.0.0.0:7800": false, ":7800": false, "example.com:80": false, "garbage": false,
	} {
		if got := servesProfiles(addr); got != want {
			t.Errorf("servesProfiles(%q) = %v, want %v", addr, got, want)
		}
	}
}
