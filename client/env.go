package client

import (
	"errors"
	"os"
	"strings"
)

// The environment variables WithEnv reads: the ones the docket CLI reads,
// and the ones `docket dev` (make run) writes to its env file.
const (
	EnvAddr    = "DOCKET_ADDR"     // comma-separated node addresses
	EnvTLSCA   = "DOCKET_TLS_CA"   // PEM file of the cluster CA: speak TLS
	EnvTLSCert = "DOCKET_TLS_CERT" // PEM client certificate, with EnvTLSKey
	EnvTLSKey  = "DOCKET_TLS_KEY"  // PEM key of the client certificate
	EnvToken   = "DOCKET_TOKEN"    // bearer token sent with every call
)

// WithEnv configures the client from the environment the docket CLI
// uses: the addresses in DOCKET_ADDR join New's, a DOCKET_TLS_CA turns
// on TLS as WithTLS does (with DOCKET_TLS_CERT and DOCKET_TLS_KEY when
// set), and DOCKET_TOKEN is sent as WithToken does. A variable that is
// unset or empty changes nothing, and an empty DOCKET_ADDR with no
// address given to New fails as no address does. After `source
// data/dev/env` (make run), New(ctx, nil, WithEnv()) reaches that
// cluster. Options after it win.
func WithEnv() Option {
	return func(c *config) {
		for _, a := range strings.Split(os.Getenv(EnvAddr), ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.addrs = append(c.addrs, a)
			}
		}
		if ca := os.Getenv(EnvTLSCA); ca != "" {
			WithTLS(ca, os.Getenv(EnvTLSCert), os.Getenv(EnvTLSKey))(c)
		} else if os.Getenv(EnvTLSCert) != "" {
			c.err = errors.Join(c.err, errors.New("env: "+EnvTLSCert+" is set without "+EnvTLSCA))
		}
		if tok := strings.TrimSpace(os.Getenv(EnvToken)); tok != "" {
			c.token = tok
		}
	}
}
