package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/internal/connlimit"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// errDebugNotLoopback refuses a debug address others could reach while
// the debug server would answer them without TLS and a token.
var errDebugNotLoopback = errors.New("--debug-addr beyond loopback needs TLS (--tls-ca, --tls-cert, --tls-key) and --auth")

// checkDebugAddr refuses a --debug-addr that is not loopback unless the
// debug server is secured (secure: the agent runs TLS and --auth): pprof
// and metrics must not be open to whoever reaches the address.
func checkDebugAddr(addr string, secure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: --debug-addr %q: %v", errUsage, addr, err)
	}
	if secure || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("%w: %w; got %q (use 127.0.0.1:PORT or [::1]:PORT)", errUsage, errDebugNotLoopback, addr)
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// servesProfiles says whether the debug server on addr serves pprof:
// only on loopback. Metrics may be scraped from the network (with TLS
// and a token); profiles, which can stall a node for their duration and
// show its internals, are for an operator on the machine.
func servesProfiles(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && isLoopback(host)
}

// debugGuard secures the debug server of an agent that runs TLS and
// --auth: HTTPS with the node's certificate, and a bearer token of the
// cluster on every request.
type debugGuard struct {
	tls *certs.Reloader
	// node authenticates secrets once it is up (setNode); until then
	// every request answers 503.
	node atomic.Pointer[cluster.Node]
}

func (g *debugGuard) setNode(n *cluster.Node) { g.node.Store(n) }

// tlsConfig is the node's API certificate with no client certificate
// asked for (the token authenticates), offering HTTP/1.1 beside h2 so
// that curl and Prometheus reach it either way.
func (g *debugGuard) tlsConfig() *tls.Config {
	api := g.tls.APIServerConfig(certs.NoClientCert)
	return &tls.Config{
		MinVersion: api.MinVersion,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := api.GetConfigForClient(hello)
			if err != nil {
				return nil, err
			}
			c.NextProtos = []string{"h2", "http/1.1"}
			return c, nil
		},
	}
}

// require admits a request whose token has one of roles over every
// tenant ("*"): the debug server's answers are not split by tenant.
func (g *debugGuard) require(h http.Handler, roles ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		node := g.node.Load()
		if node == nil {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		secret, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		tok, err := node.Service().Authenticate(strings.TrimSpace(secret))
		switch {
		case errors.Is(err, service.ErrUnauthenticated):
			w.Header().Set("WWW-Authenticate", `Bearer realm="docket"`)
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		case err != nil:
			http.Error(w, "cannot check the token now", http.StatusServiceUnavailable)
			return
		case !grants(tok, roles):
			http.Error(w, fmt.Sprintf("needs one of the roles %v over every tenant", roles), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func grants(tok *pb.Token, roles []string) bool {
	return slices.Contains(tok.GetTenants(), pb.AllTenants) &&
		slices.ContainsFunc(roles, func(r string) bool { return slices.Contains(tok.GetRoles(), r) })
}

// serveDebug serves Prometheus metrics and net/http/pprof on addr until the
// returned func is called. `docket bench` and operators use it to see what
// bounds a node. guard nil: plain HTTP with no token (a loopback address,
// checkDebugAddr); otherwise HTTPS, /metrics for a reader or admin token
// and the profiles for an admin token.
func serveDebug(addr string, reg *prometheus.Registry, log *slog.Logger, guard *debugGuard) (string, func(), error) {
	raw, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("debug listen %s: %w", addr, err)
	}
	// Its connections come out of the descriptor reserve (fdPlan).
	var lis net.Listener = connlimit.New(raw, debugMaxConns, "debug", log)
	metrics, profiles := func(h http.Handler) http.Handler { return h }, func(h http.Handler) http.Handler { return h }
	if guard != nil {
		lis = tls.NewListener(lis, guard.tlsConfig())
		metrics = func(h http.Handler) http.Handler { return guard.require(h, pb.RoleReader, pb.RoleAdmin) }
		profiles = func(h http.Handler) http.Handler { return guard.require(h, pb.RoleAdmin) }
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})))
	if servesProfiles(addr) {
		mux.Handle("/debug/pprof/", profiles(http.HandlerFunc(pprof.Index)))
		// cmdline shows the agent's flags to whoever reaches this address:
		// no flag takes a secret (Test_AgentFlagsCarryNoSecrets).
		mux.Handle("/debug/pprof/cmdline", profiles(http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", profiles(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", profiles(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", profiles(http.HandlerFunc(pprof.Trace)))
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)} // failed handshakes are the callers' business
	go func() {
		if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("debug server stopped", "err", err)
		}
	}()
	log.Info("debug server", "addr", raw.Addr().String(), "tls_and_token", guard != nil)
	return raw.Addr().String(), func() { _ = hs.Close() }, nil // closing at exit; nothing to report
}
