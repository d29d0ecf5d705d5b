package jepsen

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mustSecureCluster is a 3-node Cluster in the secure mode whose files
// exist only as paths (no binary, no namespaces): enough to build command
// lines.
func mustSecureCluster(t *testing.T, secret string) *Cluster {
	t.Helper()
	dir := t.TempDir()
	sec := &Security{Dir: filepath.Join(dir, "pki"), bootSecret: secret}
	c := &Cluster{Net: &Net{Prefix: "dj0a0b0c-", N: 3}, Bin: "/bin/docket", Dir: dir, Sec: sec}
	for i := 1; i <= 3; i++ {
		c.Nodes = append(c.Nodes, &Node{I: i, ID: "n" + string(rune('0'+i)), DataDir: filepath.Join(dir, "data", "n"+string(rune('0'+i)))})
	}
	return c
}

// flagValue is the value after flag in args, and whether flag is there.
func flagValue(args []string, flag string) (string, bool) {
	i := slices.Index(args, flag)
	if i < 0 {
		return "", false
	}
	if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
		return args[i+1], true
	}
	return "", true
}

func Test_AgentArgsSecure(t *testing.T) {
	const secret = "s3cret-bootstrap-value-0123456789"
	c := mustSecureCluster(t, secret)
	n := c.Nodes[1]
	args := c.agentArgs(n)
	want := map[string]string{
		"--tls-ca":               c.Sec.CAFile(),
		"--tls-cert":             filepath.Join(c.Sec.Dir, "n2.pem"),
		"--tls-key":              filepath.Join(c.Sec.Dir, "n2-key.pem"),
		"--tls-client-auth":      "require",
		"--bootstrap-token-file": c.Sec.BootTokenFile(),
		"--auth":                 "",
		"--gossip-key-file":      c.Sec.GossipKeyFile(),
	}
	for f, v := range want {
		got, ok := flagValue(args, f)
		if !ok || got != v {
			t.Errorf("agent args: %s = %q (present %v), want %q\nargs: %v", f, got, ok, v, args)
		}
	}
	for _, a := range args {
		if strings.Contains(a, secret) {
			t.Fatalf("the bootstrap secret is on the command line: %q", a)
		}
	}
	env := c.agentEnv()
	if !slices.Contains(env, "DOCKET_TOKEN="+secret) {
		t.Errorf("agent env lacks the join token DOCKET_TOKEN")
	}
}

func Test_AgentArgsInsecure(t *testing.T) {
	c := mustSecureCluster(t, "x")
	c.Sec = nil
	args := c.agentArgs(c.Nodes[0])
	for _, f := range []string{"--tls-ca", "--tls-cert", "--tls-key", "--auth", "--bootstrap-token-file", "--tls-client-auth"} {
		if _, ok := flagValue(args, f); ok {
			t.Errorf("insecure agent args carry %s: %v", f, args)
		}
	}
	for _, kv := range c.agentEnv() {
		if strings.HasPrefix(kv, "DOCKET_TOKEN=") || strings.HasPrefix(kv, "DOCKET_BOOTSTRAP_TOKEN=") {
			t.Errorf("insecure agent env carries %s", kv)
		}
	}
}

// A rolling upgrade starts on a build below the token level: its agents
// get TLS and the gossip key but no --auth, and its clients dial TLS
// without a token (an empty token set is not an error).
func Test_AgentArgsUpgradeNoAuth(t *testing.T) {
	c := mustSecureCluster(t, "x")
	c.Sec.NoAuth = true
	args := c.agentArgs(c.Nodes[0])
	for _, f := range []string{"--tls-ca", "--tls-cert", "--tls-key", "--tls-client-auth", "--gossip-key-file"} {
		if _, ok := flagValue(args, f); !ok {
			t.Errorf("upgrade agent args lack %s: %v", f, args)
		}
	}
	for _, f := range []string{"--auth", "--bootstrap-token-file"} {
		if _, ok := flagValue(args, f); ok {
			t.Errorf("upgrade agent args carry %s: %v", f, args)
		}
	}
	cr := c.Sec.Creds(RoleProducer, RoleWorker)
	if !cr.Secure() || len(cr.Tokens) != 0 {
		t.Fatalf("creds %+v: want TLS without tokens", cr)
	}
	if _, err := cr.ClientOptions(RoleWorker); err != nil {
		t.Fatalf("client options without tokens: %v", err)
	}
}

// The workload and helpers get files, never secrets, on their command
// lines, and read back what the controller wrote.
func Test_CredsArgsRoundTrip(t *testing.T) {
	c := mustSecureCluster(t, "boot-secret")
	if err := os.MkdirAll(c.Sec.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{RoleProducer, RoleWorker} {
		if err := os.WriteFile(c.Sec.TokenFile(r), []byte("secret-of-"+r+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cr := c.Sec.Creds(RoleProducer, RoleWorker)
	args := cr.Args()
	for _, a := range args {
		if strings.Contains(a, "secret-of-") {
			t.Fatalf("a token is on the command line: %q", a)
		}
	}
	fs := newFlagSet()
	var got Creds
	got.Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if !got.Secure() || got.CA != cr.CA || got.Cert != cr.Cert || got.Key != cr.Key {
		t.Fatalf("round trip: %+v, want %+v", got, cr)
	}
	for _, r := range []string{RoleProducer, RoleWorker} {
		s, err := got.secret(r)
		if err != nil || s != "secret-of-"+r {
			t.Errorf("%s token: %q, %v", r, s, err)
		}
	}
	if _, err := got.secret(RoleAdmin); err == nil {
		t.Errorf("a client without the admin token file got one")
	}
	if (Creds{}).Args() != nil {
		t.Errorf("plain creds give flags")
	}
}

func newFlagSet() *flag.FlagSet { return flag.NewFlagSet("t", flag.ContinueOnError) }

// results.json and index.html say which mode ran, so a plain run is never
// mistaken for a test of the secure path.
func Test_ReportNamesSecurityMode(t *testing.T) {
	for _, insecure := range []bool{false, true} {
		h := busy(50).history()
		h.Final = []NodeState{{ID: "n1", Applied: 9, Hash: "aa"}, {ID: "n2", Applied: 9, Hash: "aa"}}
		dir := t.TempDir()
		if _, err := WriteResults(RunConfig{Name: "t", ReportDir: dir, Insecure: insecure}, h); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		var s Summary
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if s.TLS == insecure || s.Auth == insecure {
			t.Errorf("insecure=%v: results.json says tls=%v auth=%v", insecure, s.TLS, s.Auth)
		}
		html, err := os.ReadFile(filepath.Join(dir, "index.html"))
		if err != nil {
			t.Fatal(err)
		}
		want := "mode: mutual TLS, tokens on"
		if insecure {
			want = "mode: plaintext, no tokens (--insecure)"
		}
		if !strings.Contains(string(html), want) {
			t.Errorf("insecure=%v: index.html does not say %q", insecure, want)
		}
	}
}
