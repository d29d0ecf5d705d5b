package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// WithTLS makes the client speak TLS to every node, trusting the CA in
// caFile (PEM) and checking each node's certificate against the address
// dialled (`docket tls cert --server` covers 127.0.0.1 and localhost; add
// others with --dns and --ip). certFile and keyFile, both or neither, are
// a client certificate for nodes that ask for one (`docket agent
// --tls-client-auth`). A file that cannot be read makes New fail.
func WithTLS(caFile, certFile, keyFile string) Option {
	return func(c *config) {
		cfg, err := TLSConfig(caFile, certFile, keyFile)
		if err != nil {
			c.err = errors.Join(c.err, err)
			return
		}
		c.dialOpts = append(c.dialOpts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	}
}

// WithTLSConfig makes the client speak TLS with cfg to every node.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *config) {
		c.dialOpts = append(c.dialOpts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	}
}

// TLSConfig is the tls.Config WithTLS uses: TLS 1.3, roots from caFile,
// and the client certificate in certFile and keyFile when given.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13}
	if caFile == "" {
		return nil, errors.New("tls: a CA file is required")
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls ca: %w", err)
	}
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls ca %s: no PEM certificate", caFile)
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("tls: a client certificate needs both its cert and its key file")
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
