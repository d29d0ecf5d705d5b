package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/dockethq/docket/client"
)

// probeTimeout bounds one node's probe. A node that neither accepts nor
// refuses within it (a dropped SYN, a paused process) is left to the
// client, which waits out --timeout for it: only an answer that names a
// cause fails fast.
const probeTimeout = 2 * time.Second

// h2Preface is what a gRPC client sends first: the HTTP/2 connection
// preface and an empty SETTINGS frame. A gRPC server answers with its own
// SETTINGS frame.
var h2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")

// connErr is a connection the CLI could not make, with the sentence that
// says what to fix. Its exit code is exitConnect.
type connErr struct {
	addrs []string
	cause string // what the node did
	fix   string // what the user should change
	err   error  // the first underlying error, for errors.Is
}

func (e *connErr) Error() string {
	return fmt.Sprintf("cannot talk to %s: %s; %s", strings.Join(e.addrs, ","), e.cause, e.fix)
}

func (e *connErr) Unwrap() error { return e.err }

// probeKind orders what a probe found: a higher kind names a more useful
// fix, so it is the one reported when every node failed.
type probeKind int

const (
	probeOK           probeKind = iota
	probeInconclusive           // no answer within probeTimeout, or one we cannot read
	probeRefused                // nothing listens
	probeTLSMismatch            // TLS on one side only
	probeTLSTrust               // certificate or client certificate refused
)

type probeResult struct {
	addr  string
	kind  probeKind
	cause string
	fix   string
	err   error
}

// probe checks, before the client's leader discovery, that some node of
// addrs accepts a connection spoken the way the client will speak it: a
// TCP connect, the TLS handshake when cfg is set, and an HTTP/2 preface.
// The client retries a failed connection until --timeout ends; a refused
// port or a certificate that will never verify fails here in milliseconds
// instead, with a sentence naming the fix. It returns nil when one node
// answers, or when none answered with a cause (the client then waits).
func probe(ctx context.Context, addrs []string, cfg *tls.Config, tf tlsFiles) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	results := make(chan probeResult, len(addrs)) // buffered: no sender blocks
	for _, a := range addrs {
		go func() { results <- probeOne(ctx, a, cfg, tf) }()
	}
	var worst probeResult
	var failed []string
	for range addrs {
		r := <-results // every probeOne returns by ctx's deadline
		if r.kind == probeOK || r.kind == probeInconclusive {
			return nil
		}
		failed = append(failed, r.addr)
		if r.kind > worst.kind {
			worst = r
		}
	}
	return &connErr{addrs: failed, cause: worst.cause, fix: worst.fix, err: worst.err}
}

func probeOne(ctx context.Context, addr string, cfg *tls.Config, tf tlsFiles) probeResult {
	r := probeResult{addr: addr, kind: probeInconclusive}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			r.kind, r.err = probeRefused, err
			r.cause = "connection refused (no node listens there)"
			r.fix = "start the cluster (docket dev, or docket agent on each node) or fix --addr / DOCKET_ADDR"
		}
		return r
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return r
		}
	}
	var rw io.ReadWriter = conn
	if cfg != nil {
		c := cfg.Clone()
		c.NextProtos = []string{"h2"}
		if c.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				c.ServerName = host
			}
		}
		tc := tls.Client(conn, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			return tlsFailure(r, err, tf)
		}
		rw = tc
	}
	if _, err := rw.Write(h2Preface); err != nil {
		return readFailure(r, err, cfg != nil, nil, tf)
	}
	var hdr [9]byte
	n, err := io.ReadFull(rw, hdr[:])
	if err != nil {
		return readFailure(r, err, cfg != nil, hdr[:n], tf)
	}
	if hdr[3] == 0x4 { // a SETTINGS frame: an HTTP/2 server
		r.kind = probeOK
	}
	return r
}

// tlsFailure explains a handshake the client made and the node refused
// or could not pass.
func tlsFailure(r probeResult, err error, tf tlsFiles) probeResult {
	r.err = err
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var rec tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		r.kind = probeTLSTrust
		r.cause = fmt.Sprintf("its certificate is not signed by the CA in --tls-ca %s", tf.ca)
		r.fix = "point --tls-ca (or DOCKET_TLS_CA) at the cluster's CA file (docket dev: source DATA-DIR/env, whose CA is DATA-DIR/tls/docket-ca.pem)"
	case errors.As(err, &host):
		r.kind = probeTLSTrust
		r.cause = fmt.Sprintf("its certificate does not cover this address (%v)", err)
		r.fix = "dial an address the node's certificate names, or issue it one with docket tls cert --server --ip/--dns"
	case errors.As(err, &rec):
		r.kind = probeTLSMismatch
		r.cause = "the node does not speak TLS, but --tls-ca is set"
		r.fix = "drop --tls-ca, --tls-cert and --tls-key (and DOCKET_TLS_*) for a cluster run without TLS"
	default:
		return remoteAlert(r, err)
	}
	return r
}

// readFailure explains a node that took the connection but closed it, or
// sent something other than HTTP/2, in answer to the preface.
func readFailure(r probeResult, err error, usingTLS bool, got []byte, tf tlsFiles) probeResult {
	r.err = err
	if usingTLS {
		return remoteAlert(r, err)
	}
	// A TLS server reads the preface as a broken record: it closes the
	// connection or sends an alert (record type 21).
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		(len(got) > 0 && got[0] == 21) {
		r.kind = probeTLSMismatch
		r.cause = "the node speaks TLS and the CLI was given no CA"
		r.fix = "pass --tls-ca FILE (or set DOCKET_TLS_CA) with the cluster's CA (docket dev: source DATA-DIR/env)"
	}
	return r
}

// remoteAlert explains a TLS alert from the node, sent when it refused
// the client's certificate or the lack of one.
func remoteAlert(r probeResult, err error) probeResult {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "certificate required"):
		r.kind = probeTLSTrust
		r.cause = "the node asks for a client certificate and none was given"
		r.fix = "pass --tls-cert and --tls-key (or DOCKET_TLS_CERT, DOCKET_TLS_KEY) with one signed by the cluster CA (docket tls cert --client)"
	case strings.Contains(msg, "bad certificate"), strings.Contains(msg, "unknown certificate authority"),
		strings.Contains(msg, "certificate expired"), strings.Contains(msg, "certificate revoked"):
		r.kind = probeTLSTrust
		r.cause = "the node refused the client certificate (" + msg + ")"
		r.fix = "pass a --tls-cert and --tls-key signed by the cluster CA and not expired (docket tls cert --client)"
	}
	return r
}

// probeTLS is the tls.Config the client will use, or nil without TLS. A
// file that cannot be read is left for client.WithTLS to report.
func probeTLS(tf tlsFiles) *tls.Config {
	if tf.ca == "" {
		return nil
	}
	cfg, err := client.TLSConfig(tf.ca, tf.cert, tf.key)
	if err != nil {
		return nil
	}
	return cfg
}
