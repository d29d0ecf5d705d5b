package jepsen

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// built is the docket binary the tests share, built once per test
// binary into binDir (removed by TestMain).
var (
	buildOnce sync.Once
	binDir    string
	built     string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		if err := os.RemoveAll(binDir); err != nil {
			fmt.Fprintf(os.Stderr, "removing the test binary's directory: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// mustBuildDocket builds the docket binary: the harness makes its
// certificates with the binary, as an operator does.
func mustBuildDocket(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "jepsen-test-bin-"); buildErr != nil {
			return
		}
		built = filepath.Join(binDir, "docket")
		cmd := exec.Command("go", "build", "-o", built, "./cmd/docket")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build docket: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func mustCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Clients dial a node by its test address and check its certificate
// against it: each node's certificate must name that address, and the
// client certificate must be good for client auth only. Secrets are
// readable by their owner alone.
func Test_SecurityCertsNameNodeAddresses(t *testing.T) {
	bin := mustBuildDocket(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sec, err := NewSecurity(ctx, bin, filepath.Join(t.TempDir(), "pki"), 3)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(mustCert(t, sec.CAFile()))
	for i := 1; i <= 3; i++ {
		cert, _ := sec.certFiles("n" + string(rune('0'+i)))
		c := mustCert(t, cert)
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: nodeIP(i), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("n%d's certificate does not verify for %s: %v", i, nodeIP(i), err)
		}
		if i > 1 {
			if err := c.VerifyHostname(nodeIP(i - 1)); err == nil {
				t.Errorf("n%d's certificate also names n%d's address", i, i-1)
			}
		}
	}
	cc, _ := sec.certFiles(clientCertName)
	if _, err := mustCert(t, cc).Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	for _, p := range []string{sec.BootTokenFile(), sec.Dir} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: others may read it", p, fi.Mode().Perm())
		}
	}
	if s, err := os.ReadFile(sec.BootTokenFile()); err != nil || len(s) < 40 {
		t.Errorf("bootstrap secret file: %d bytes, %v", len(s), err)
	}
}
