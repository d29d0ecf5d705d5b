package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dockethq/docket/cmd/docket/tlsgen"
)

// pki is a CA in a directory with certificates made on demand.
type pki struct {
	t   *testing.T
	dir string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := tlsgen.CA(dir, 1); err != nil {
		t.Fatal(err)
	}
	return &pki{t: t, dir: dir}
}

func (p *pki) cert(o tlsgen.CertOptions) Files {
	p.t.Helper()
	o.Dir = p.dir
	c, k, err := tlsgen.Cert(o)
	if err != nil {
		p.t.Fatal(err)
	}
	return Files{CA: filepath.Join(p.dir, tlsgen.CAFile), Cert: c, Key: k}
}

func mustLoad(t *testing.T, f Files) *Reloader {
	t.Helper()
	r, err := Load(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// handshake runs a TLS handshake over a loopback pipe and returns the
// server's and the client's errors; the client also reads one byte, since
// in TLS 1.3 a client learns of the server refusing its certificate only
// on its first read.
func handshake(t *testing.T, server, client *tls.Config) (serr, cerr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		err = tc.Handshake()
		if err == nil {
			_, err = tc.Write([]byte{1})
		}
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := tls.Dialer{Config: client}
	c, cerr := d.DialContext(ctx, "tcp", ln.Addr().String())
	if cerr == nil {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, cerr = c.Read(make([]byte, 1))
		c.Close()
	}
	return <-done, cerr
}

func Test_PeerAcceptsOnlyServerCertificates(t *testing.T) {
	p := newPKI(t)
	n1 := mustLoad(t, p.cert(tlsgen.CertOptions{Name: "n1", Server: true}))
	n2 := mustLoad(t, p.cert(tlsgen.CertOptions{Name: "n2", Server: true}))
	worker := mustLoad(t, p.cert(tlsgen.CertOptions{Name: "worker"}))
	other := newPKI(t)
	rogue := mustLoad(t, other.cert(tlsgen.CertOptions{Name: "rogue", Server: true}))

	if serr, cerr := handshake(t, n1.PeerServerConfig(), n2.PeerClientConfig()); serr != nil || cerr != nil {
		t.Fatalf("node to node: server %v, client %v", serr, cerr)
	}
	serr, cerr := handshake(t, n1.PeerServerConfig(), worker.PeerClientConfig())
	if !errors.Is(serr, ErrNotServer) || cerr == nil {
		t.Errorf("worker's client certificate on Raft: server %v, client %v; want ErrNotServer and a refusal", serr, cerr)
	}
	if serr, cerr := handshake(t, n1.PeerServerConfig(), rogue.PeerClientConfig()); serr == nil || cerr == nil {
		t.Errorf("other CA's server certificate on Raft: server %v, client %v; want both to fail", serr, cerr)
	}
	// A node dialling must refuse a listener with a worker's certificate.
	if serr, cerr := handshake(t, worker.APIServerConfig(NoClientCert), n1.PeerClientConfig()); cerr == nil {
		t.Errorf("node dialled a worker-certified listener: server %v, client accepted", serr)
	}
}

func Test_APIClientAuth(t *testing.T) {
	p := newPKI(t)
	n1 := mustLoad(t, p.cert(tlsgen.CertOptions{Name: "n1", Server: true}))
	wf := p.cert(tlsgen.CertOptions{Name: "worker"})
	pair, err := tls.LoadX509KeyPair(wf.Cert, wf.Key)
	if err != nil {
		t.Fatal(err)
	}
	roots := n1.cur.Load().roots
	anon := &tls.Config{MinVersion: MinVersion, ServerName: "127.0.0.1", RootCAs: roots, NextProtos: []string{"h2"}}
	withCert := anon.Clone()
	withCert.Certificates = []tls.Certificate{pair}

	if serr, cerr := handshake(t, n1.APIServerConfig(RequireClientCert), anon); serr == nil || cerr == nil {
		t.Errorf("require, no cert: server %v, client %v; want a refusal", serr, cerr)
	}
	if serr, cerr := handshake(t, n1.APIServerConfig(RequireClientCert), withCert); serr != nil || cerr != nil {
		t.Errorf("require, CA cert: server %v, client %v", serr, cerr)
	}
	if serr, cerr := handshake(t, n1.APIServerConfig(VerifyIfGiven), anon); serr != nil || cerr != nil {
		t.Errorf("verify-if-given, no cert: server %v, client %v", serr, cerr)
	}
	old := &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, RootCAs: roots, ServerName: "127.0.0.1"}
	if serr, cerr := handshake(t, n1.APIServerConfig(NoClientCert), old); serr == nil || cerr == nil {
		t.Errorf("TLS 1.2 client: server %v, client %v; want a refusal", serr, cerr)
	}
}

func Test_ExpiredPeerRefused(t *testing.T) {
	p := newPKI(t)
	n1 := mustLoad(t, p.cert(tlsgen.CertOptions{Name: "n1", Server: true}))
	f := p.cert(tlsgen.CertOptions{Name: "old", Server: true, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	if _, err := Load(f, nil); !errors.Is(err, ErrExpired) {
		t.Fatalf("Load of an expired certificate: %v, want ErrExpired", err)
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := n1.PeerClientConfig()
	cfg.Certificates = []tls.Certificate{pair}
	if serr, cerr := handshake(t, n1.PeerServerConfig(), cfg); serr == nil || cerr == nil {
		t.Errorf("expired peer: server %v, client %v; want a refusal", serr, cerr)
	}
}

func Test_ReloadSwapsForNewHandshakes(t *testing.T) {
	p := newPKI(t)
	f := p.cert(tlsgen.CertOptions{Name: "n1", Server: true})
	r := mustLoad(t, f)
	first := r.cur.Load().cert.Leaf.SerialNumber

	// A bad set is refused and the old one stays.
	if err := os.WriteFile(f.Cert, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil {
		t.Fatal("reload of a garbage certificate succeeded")
	}
	// A new certificate (written aside, then moved over the old files).
	nf := p.cert(tlsgen.CertOptions{Name: "n1-next", Server: true, Days: 2})
	for _, mv := range [][2]string{{nf.Cert, f.Cert}, {nf.Key, f.Key}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}
	cfg := r.APIServerConfig(NoClientCert)
	var seen []byte
	check := &tls.Config{MinVersion: MinVersion, ServerName: ServerName, RootCAs: r.cur.Load().roots,
		VerifyConnection: func(cs tls.ConnectionState) error { seen = cs.PeerCertificates[0].SerialNumber.Bytes(); return nil }}
	if _, cerr := handshake(t, cfg, check); cerr != nil || string(seen) != string(first.Bytes()) {
		t.Fatalf("before reload: err %v, serial changed %v", cerr, string(seen) != string(first.Bytes()))
	}
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, cerr := handshake(t, cfg, check); cerr != nil || string(seen) == string(first.Bytes()) {
		t.Fatalf("after reload: err %v, still the old certificate %v", cerr, string(seen) == string(first.Bytes()))
	}
	if got := r.NotAfter(); time.Until(got) < 36*time.Hour {
		t.Errorf("NotAfter %v is not the new certificate's", got)
	}
}

func Test_ParseClientAuth(t *testing.T) {
	for s, want := range map[string]ClientAuth{"require": RequireClientCert, "verify-if-given": VerifyIfGiven, "none": NoClientCert} {
		if got, err := ParseClientAuth(s); err != nil || got != want {
			t.Errorf("%s: %v %v", s, got, err)
		}
	}
	if _, err := ParseClientAuth("maybe"); err == nil {
		t.Error("maybe parsed")
	}
}
