// Package tlsgen writes the cluster's certificate authority and the
// certificates it signs: `docket tls ca` and `docket tls cert`.
//
// # Decisions and trade-offs
//
//   - ECDSA P-256 keys: small, fast to sign and verify in TLS 1.3, and
//     accepted by every TLS stack a client may use.
//   - Server certificates carry both ServerAuth and ClientAuth: a node
//     serves its peers and also dials them (Raft, forwarding, discovery)
//     with the same certificate. They carry the DNS name ServerName
//     ("server.docket"), which is what Raft and a node's own dials check
//     (as Consul's verify_server_hostname checks server.<dc>.<domain>), so
//     no address has to be in a certificate for nodes to trust each other.
//     127.0.0.1 and localhost are added so a local client can verify the
//     API by the address it dials.
//   - Client certificates carry only ClientAuth and never ServerName, so
//     a worker's certificate can never pass for a node.
//   - Keys are written 0600 and never overwritten: an existing file stops
//     the command, so a second `tls ca` cannot silently replace the CA
//     that signed a running cluster.
package tlsgen

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// ServerName is the DNS name every server certificate carries and every
// node checks when it accepts or dials a peer. It equals certs.ServerName.
const ServerName = "server.docket"

// CA and key file names inside the directory.
const (
	CAFile    = "docket-ca.pem"
	CAKeyFile = "docket-ca-key.pem"
)

// ErrExists is returned instead of overwriting a certificate or key.
var ErrExists = errors.New("file exists")

// DefaultCADays and DefaultCertDays are the validity when none is given:
// five years for the CA, one year for a certificate, as Consul does.
const (
	DefaultCADays   = 5 * 365
	DefaultCertDays = 365
)

// CA writes a self-signed CA into dir (docket-ca.pem, docket-ca-key.pem)
// valid for days, and returns the two paths.
func CA(dir string, days int) (certPath, keyPath string, err error) {
	if days <= 0 {
		days = DefaultCADays
	}
	certPath, keyPath = filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	if err := refuseExisting(certPath, keyPath); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("ca key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Docket CA " + serial.Text(16)[:8], Organization: []string{"Docket"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(time.Duration(days) * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return "", "", fmt.Errorf("sign ca: %w", err)
	}
	return certPath, keyPath, writePair(dir, certPath, keyPath, der, key)
}

// CertOptions describe one certificate signed by the CA in Dir.
type CertOptions struct {
	Dir    string // holds the CA; the certificate is written here too
	Name   string // file stem: <name>.pem, <name>-key.pem
	Server bool   // a node's certificate; otherwise a client's
	DNS    []string
	IPs    []net.IP
	Days   int
	// NotBefore and NotAfter, when set, replace the validity computed from
	// Days. Tests use them to make expired certificates.
	NotBefore, NotAfter time.Time
}

// Cert writes a certificate signed by the CA in o.Dir and returns the
// paths of the certificate and its key.
func Cert(o CertOptions) (certPath, keyPath string, err error) {
	if o.Name == "" {
		o.Name = map[bool]string{true: "server", false: "client"}[o.Server]
	}
	if o.Days <= 0 {
		o.Days = DefaultCertDays
	}
	certPath = filepath.Join(o.Dir, o.Name+".pem")
	keyPath = filepath.Join(o.Dir, o.Name+"-key.pem")
	if err := refuseExisting(certPath, keyPath); err != nil {
		return "", "", err
	}
	caCert, caKey, err := loadCA(o.Dir)
	if err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: o.Name, Organization: []string{"Docket"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(time.Duration(o.Days) * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if !o.NotBefore.IsZero() {
		tmpl.NotBefore = o.NotBefore
	}
	if !o.NotAfter.IsZero() {
		tmpl.NotAfter = o.NotAfter
	}
	tmpl.DNSNames, tmpl.IPAddresses = o.DNS, o.IPs
	if o.Server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames = appendNew(append([]string{ServerName, "localhost"}, o.DNS...))
		tmpl.IPAddresses = append([]net.IP{net.IPv4(127, 0, 0, 1)}, o.IPs...)
	} else if slices.Contains(o.DNS, ServerName) {
		return "", "", fmt.Errorf("a client certificate may not carry %s: that name marks a server", ServerName)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return "", "", fmt.Errorf("sign %s: %w", o.Name, err)
	}
	return certPath, keyPath, writePair(o.Dir, certPath, keyPath, der, key)
}

func appendNew(in []string) []string {
	var out []string
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func loadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, nil, fmt.Errorf("read CA (run `docket tls ca` first): %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("read CA key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("%s or %s: no PEM block", CAFile, CAKeyFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA: %w", err)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("CA key of type %T cannot sign", key)
	}
	return cert, signer, nil
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial: %w", err)
	}
	return s, nil
}

func refuseExisting(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%w: %s (move it away to write a new one)", ErrExists, p)
		}
	}
	return nil
}

// writePair writes the certificate 0644 and the key 0600, creating dir.
func writePair(dir, certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dir: %w", err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal key: %w", err)
	}
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return writeNew(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// writeNew creates path with mode (O_EXCL: never over an existing file).
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", path, err), f.Close())
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
