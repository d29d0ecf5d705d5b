package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
)

// ServerName is the DNS name every server certificate carries (`docket tls
// cert --server` writes it) and every node checks on a peer's certificate,
// whatever address it dialled: a client certificate never carries it.
const ServerName = "server.docket"

// MinVersion is the lowest TLS version any Docket endpoint speaks.
const MinVersion = tls.VersionTLS13

// Errors a caller may branch on.
var (
	// ErrNotServer: a peer's certificate is from the cluster CA but is no
	// server certificate (no ServerName, or no ServerAuth usage).
	ErrNotServer = errors.New("certificate is not a Docket server certificate")
	// ErrExpired: a certificate to load is past its NotAfter.
	ErrExpired = errors.New("certificate expired")
)

// Files names the PEM files of a node's TLS material.
type Files struct {
	CA   string // the cluster CA's certificate(s): what peers and clients are checked against
	Cert string // this node's certificate
	Key  string // its private key
}

// ClientAuth is what the client API asks of a client's certificate.
type ClientAuth int

// The client API's policies, as `docket agent --tls-client-auth` names them.
const (
	// VerifyIfGiven checks a certificate a client presents and lets
	// clients without one in (tokens then authenticate them).
	VerifyIfGiven ClientAuth = iota
	// RequireClientCert refuses, at the handshake, a client without a
	// certificate from the cluster CA.
	RequireClientCert
	// NoClientCert asks for no certificate.
	NoClientCert
)

// ParseClientAuth reads "require", "verify-if-given" or "none".
func ParseClientAuth(s string) (ClientAuth, error) {
	switch s {
	case "require":
		return RequireClientCert, nil
	case "verify-if-given", "":
		return VerifyIfGiven, nil
	case "none":
		return NoClientCert, nil
	}
	return 0, fmt.Errorf("client auth %q: want require, verify-if-given or none", s)
}

func (a ClientAuth) tlsType() tls.ClientAuthType {
	switch a {
	case RequireClientCert:
		return tls.RequireAndVerifyClientCert
	case NoClientCert:
		return tls.NoClientCert
	}
	return tls.VerifyClientCertIfGiven
}

// material is one consistent load of the three files.
type material struct {
	cert  tls.Certificate // Leaf set
	roots *x509.CertPool
}

// Reloader holds a node's certificate, key and CA, and swaps them
// atomically on Reload. Every tls.Config and credential it hands out reads
// the current material at each handshake, so a reload reaches new
// connections without a restart; connections already open keep the
// certificate they were made with.
type Reloader struct {
	files Files
	log   *slog.Logger
	cur   atomic.Pointer[material]
}

// Load reads files once; it fails if they do not make a usable set (see
// Reload). log may be nil.
func Load(files Files, log *slog.Logger) (*Reloader, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{files: files, log: log.With("component", "tls")}
	m, err := load(files, time.Now())
	if err != nil {
		return nil, err
	}
	r.cur.Store(m)
	r.log.Info("tls certificate loaded", "cert", files.Cert, "subject", m.cert.Leaf.Subject.CommonName, "not_after", m.cert.Leaf.NotAfter)
	return r, nil
}

// Reload reads the files again and, if they make a usable set, swaps them
// in for new handshakes. On error the old set stays in use. `docket agent`
// calls it on SIGHUP.
func (r *Reloader) Reload() error {
	m, err := load(r.files, time.Now())
	if err != nil {
		r.log.Error("tls reload failed; keeping the old certificate", "err", err)
		return err
	}
	r.cur.Store(m)
	r.log.Info("tls certificate reloaded", "cert", r.files.Cert, "subject", m.cert.Leaf.Subject.CommonName, "not_after", m.cert.Leaf.NotAfter)
	return nil
}

// NotAfter is when the current certificate expires.
func (r *Reloader) NotAfter() time.Time { return r.cur.Load().cert.Leaf.NotAfter }

// load reads and checks a set: the key matches the certificate, the
// certificate chains to the CA and is not expired.
func load(f Files, now time.Time) (*material, error) {
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("tls ca: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("tls ca %s: no PEM certificate", f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("tls cert %s, key %s: %w", f.Cert, f.Key, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls cert %s: %w", f.Cert, err)
		}
	}
	if now.After(cert.Leaf.NotAfter) {
		return nil, fmt.Errorf("tls cert %s: %w at %s", f.Cert, ErrExpired, cert.Leaf.NotAfter.Format(time.RFC3339))
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("tls cert %s is not signed by the CA in %s: %w", f.Cert, f.CA, err)
	}
	return &material{cert: cert, roots: roots}, nil
}

// APIServerConfig is the client API's TLS: this node's certificate, and the
// client's checked against the CA as auth says. ALPN h2 is set, as gRPC
// requires.
func (r *Reloader) APIServerConfig(auth ClientAuth) *tls.Config {
	return &tls.Config{
		MinVersion: MinVersion,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.cur.Load()
			return &tls.Config{MinVersion: MinVersion, NextProtos: []string{"h2"},
				Certificates: []tls.Certificate{m.cert}, ClientCAs: m.roots, ClientAuth: auth.tlsType()}, nil
		},
	}
}

// PeerServerConfig is what a node accepts peers with (Raft): a client
// certificate is required and must be a server certificate of the cluster
// CA (verifyServer), so a worker's client certificate cannot speak Raft.
func (r *Reloader) PeerServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: MinVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.cur.Load()
			return &tls.Config{MinVersion: MinVersion, Certificates: []tls.Certificate{m.cert},
				ClientAuth: tls.RequireAnyClientCert,
				VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
					return verifyServer(raw, m.roots)
				}}, nil
		},
	}
}

// PeerClientConfig is what a node dials a peer with (Raft, and its gRPC
// calls to other nodes): it presents its own certificate and accepts only
// a server certificate of the cluster CA, by ServerName rather than the
// address dialled. Call it per connection: it is built from the current
// material.
func (r *Reloader) PeerClientConfig() *tls.Config {
	m := r.cur.Load()
	return &tls.Config{MinVersion: MinVersion, ServerName: ServerName, RootCAs: m.roots,
		Certificates: []tls.Certificate{m.cert}}
}

// verifyServer checks a peer's chain against roots, for ServerName and
// server use.
func verifyServer(raw [][]byte, roots *x509.CertPool) error {
	if len(raw) == 0 {
		return errors.New("no peer certificate")
	}
	certs := make([]*x509.Certificate, 0, len(raw))
	for _, der := range raw {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("peer certificate: %w", err)
		}
		certs = append(certs, c)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: ServerName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotServer, err)
	}
	return nil
}

// ServerCredentials are the client API's gRPC credentials.
func (r *Reloader) ServerCredentials(auth ClientAuth) credentials.TransportCredentials {
	return credentials.NewTLS(r.APIServerConfig(auth))
}

// PeerCredentials are the gRPC credentials a node dials other nodes with
// (forwarding, discovery, consistency checks): PeerClientConfig, rebuilt
// at each handshake so a reload reaches the next connection.
func (r *Reloader) PeerCredentials() credentials.TransportCredentials {
	return peerCreds{r: r, TransportCredentials: credentials.NewTLS(r.PeerClientConfig())}
}

// peerCreds is gRPC's TLS credentials with the config taken afresh at each
// client handshake. The embedded credentials answer Info and the server
// side, which peers never use.
type peerCreds struct {
	credentials.TransportCredentials
	r *Reloader
}

func (p peerCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(p.r.PeerClientConfig()).ClientHandshake(ctx, authority, conn)
}

func (p peerCreds) Clone() credentials.TransportCredentials {
	return peerCreds{r: p.r, TransportCredentials: p.TransportCredentials.Clone()}
}

// IsPeer reports whether a connection's client proved it is a node of the
// cluster: its certificate chain was verified against the cluster CA (the
// API server's ClientCAs) and its leaf is a server certificate for
// ServerName, which only nodes hold. A worker's client certificate is not.
func IsPeer(state *tls.ConnectionState) bool {
	if state == nil {
		return false
	}
	for _, chain := range state.VerifiedChains {
		if len(chain) == 0 {
			continue
		}
		leaf := chain[0]
		if leaf.VerifyHostname(ServerName) == nil && slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
			return true
		}
	}
	return false
}
