package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cmd/docket/tlsgen"
	"github.com/dockethq/docket/transport"
)

// failFastWithin is the bar: a setup error comes back in well
// under a second, though --timeout allows ten.
const failFastWithin = time.Second

// Test_CLIFailsFastAndClearly: `docket enqueue` against a closed port, a
// TLS cluster with the wrong CA or none, a cluster that wants a client
// certificate, and an auth cluster without a token each fail in under a
// second, far inside --timeout 10s, with exit code 4 and a sentence that
// names the fix.
func Test_CLIFailsFastAndClearly(t *testing.T) {
	closed := closedAddr(t)
	pki := newPKIDir(t)
	tlsNodes, _ := startSecureCluster(t, 1, pki, certs.VerifyIfGiven)
	mpki := newPKIDir(t) // its own: node ids name the certificate files
	mtlsNodes, _ := startSecureCluster(t, 1, mpki, certs.RequireClientCert)
	authNodes := startClusterAPI(t, 1, func(c *cluster.Config) { c.BootstrapSecret = "bootstrap-secret-for-the-test" },
		transport.Config{Auth: true})
	other := newPKIDir(t) // a CA that signed none of the nodes
	other.files(tlsgen.CertOptions{Name: "unused", Server: true})

	cases := []struct {
		name string
		args []string
		want []string // each must appear in the message
	}{
		{"closed port", []string{"--addr", closed}, []string{"connection refused", "start the cluster", "--addr"}},
		{"wrong CA", []string{"--addr", tlsNodes[0].grpcAddr, "--tls-ca", other.ca()},
			[]string{"not signed by the CA in --tls-ca", "point --tls-ca"}},
		{"no CA", []string{"--addr", tlsNodes[0].grpcAddr}, []string{"speaks TLS", "pass --tls-ca"}},
		{"no client certificate", []string{"--addr", mtlsNodes[0].grpcAddr, "--tls-ca", mpki.ca()},
			[]string{"asks for a client certificate", "pass --tls-cert and --tls-key"}},
		{"no token", []string{"--addr", authNodes[0].grpcAddr}, []string{"refused the token", "pass --token or set DOCKET_TOKEN"}},
	}
	t.Setenv(envToken, "")
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			args := append([]string{"enqueue", "jobs", "x", "--timeout", "10s"}, tc.args...)
			var out, errb bytes.Buffer
			start := time.Now()
			err := run(context.Background(), args, &out, &errb)
			took := time.Since(start)
			if err == nil {
				t.Fatalf("enqueue succeeded: %s", out.String())
			}
			msg := describe(err)
			t.Logf("%s: %v, exit %d: %s", tc.name, took.Round(time.Millisecond), exitCode(err), msg)
			if took >= failFastWithin {
				t.Errorf("took %v, want under %v", took, failFastWithin)
			}
			if exitCode(err) != exitConnect {
				t.Errorf("exit code %d, want %d", exitCode(err), exitConnect)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
		})
	}
}
