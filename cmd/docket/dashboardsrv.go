package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"

	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cmd/docket/dashboard"
	"github.com/dockethq/docket/internal/connlimit"
)

// errHTTPNotLoopback refuses a dashboard address others could reach while
// anyone reaching it could act without a token over plain HTTP.
var errHTTPNotLoopback = errors.New("--http-addr beyond loopback needs TLS (--tls-ca, --tls-cert, --tls-key) and --auth")

// dashboardMaxConns bounds the dashboard's connections: a browser opens a
// few, and the descriptors come out of the reserve (fdPlan) like the debug
// server's.
const dashboardMaxConns = 64

// checkHTTPAddr is checkDebugAddr's rule for --http-addr: loopback only,
// unless the agent runs TLS and --auth.
func checkHTTPAddr(addr string, secure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: --http-addr %q: %v", errUsage, addr, err)
	}
	if secure || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: %w; got %q (use 127.0.0.1:PORT or [::1]:PORT)", errUsage, errHTTPNotLoopback, addr)
	}
	return nil
}

// dashboardTarget is the address the dashboard dials for its own node's
// API: --grpc-addr, with a wildcard host made loopback. A port of 0 is
// refused: the dashboard would not know the port the node bound.
func dashboardTarget(grpcAddr string) (string, error) {
	host, port, err := net.SplitHostPort(grpcAddr)
	if err != nil {
		return "", fmt.Errorf("%w: --grpc-addr %q: %v", errUsage, grpcAddr, err)
	}
	if port == "0" {
		return "", fmt.Errorf("%w: --http-addr needs a fixed --grpc-addr port, not 0", errUsage)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// serveDashboard serves the web dashboard on addr until the returned func
// is called. It is a client of the node's API at grpcAddr; reloader, when
// not nil, makes it HTTPS with the node's certificate and dials the API
// with the node's peer credentials (any client certificate policy admits
// them).
func serveDashboard(addr, grpcAddr string, auth bool, reloader *certs.Reloader, reg prometheus.Registerer, log *slog.Logger) (string, func(), error) {
	target, err := dashboardTarget(grpcAddr)
	if err != nil {
		return "", nil, err
	}
	var creds credentials.TransportCredentials
	if reloader != nil {
		creds = reloader.PeerCredentials()
	}
	d, err := dashboard.New(dashboard.Config{GRPCAddr: target, Creds: creds, Auth: auth, HTTPS: reloader != nil, Logger: log, Registerer: reg})
	if err != nil {
		return "", nil, err
	}
	raw, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, errors.Join(fmt.Errorf("dashboard listen %s: %w", addr, err), d.Close())
	}
	var lis net.Listener = connlimit.New(raw, dashboardMaxConns, "http", log)
	scheme := "http"
	if reloader != nil {
		lis = tls.NewListener(lis, (&debugGuard{tls: reloader}).tlsConfig())
		scheme = "https"
	}
	hs := &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("dashboard stopped", "err", err)
		}
	}()
	url := scheme + "://" + raw.Addr().String() + "/"
	log.Info("dashboard", "url", url, "auth", auth)
	return url, func() {
		_ = hs.Close() // closing at exit; nothing to report
		<-done
		_ = d.Close()
	}, nil
}
