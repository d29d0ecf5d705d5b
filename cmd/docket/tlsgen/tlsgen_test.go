package tlsgen

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"slices"
	"testing"
	"time"
)

func mustParse(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != want {
		t.Errorf("%s mode %v, want %v", path, st.Mode().Perm(), want)
	}
}

func Test_CAAndCertificates(t *testing.T) {
	dir := t.TempDir()
	caPath, caKey, err := CA(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustMode(t, caKey, 0o600)
	ca := mustParse(t, caPath)
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Fatalf("CA: IsCA %v, key usage %v", ca.IsCA, ca.KeyUsage)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)

	srvPath, srvKey, err := Cert(CertOptions{Dir: dir, Name: "n1", Server: true, DNS: []string{"n1.example"}, IPs: []net.IP{net.ParseIP("10.1.2.3")}})
	if err != nil {
		t.Fatal(err)
	}
	mustMode(t, srvKey, 0o600)
	srv := mustParse(t, srvPath)
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := srv.Verify(x509.VerifyOptions{Roots: roots, DNSName: ServerName, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			t.Errorf("server cert for usage %v: %v", u, err)
		}
	}
	for _, h := range []string{"n1.example", "localhost", "127.0.0.1", "10.1.2.3"} {
		if err := srv.VerifyHostname(h); err != nil {
			t.Errorf("server cert: %v", err)
		}
	}

	cliPath, _, err := Cert(CertOptions{Dir: dir, Name: "worker", DNS: []string{"w.example"}})
	if err != nil {
		t.Fatal(err)
	}
	cli := mustParse(t, cliPath)
	if slices.Contains(cli.DNSNames, ServerName) {
		t.Errorf("client cert carries %s", ServerName)
	}
	if _, err := cli.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client cert as client: %v", err)
	}
	if _, err := cli.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("client cert verified for server use")
	}
	if _, _, err := Cert(CertOptions{Dir: dir, Name: "sneaky", DNS: []string{ServerName}}); err == nil {
		t.Error("client cert with the server name was written")
	}
}

func Test_RefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := CA(dir, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CA(dir, 1); !errors.Is(err, ErrExists) {
		t.Fatalf("second CA: %v, want ErrExists", err)
	}
	if _, _, err := Cert(CertOptions{Dir: dir, Server: true}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Cert(CertOptions{Dir: dir, Server: true}); !errors.Is(err, ErrExists) {
		t.Fatalf("second cert: %v, want ErrExists", err)
	}
}

func Test_ExpiredCertificate(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := CA(dir, 1); err != nil {
		t.Fatal(err)
	}
	p, _, err := Cert(CertOptions{Dir: dir, Server: true, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if c := mustParse(t, p); !c.NotAfter.Before(time.Now()) {
		t.Fatalf("NotAfter %v is not in the past", c.NotAfter)
	}
}
