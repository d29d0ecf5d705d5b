package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/certs"
	"github.com/dockethq/docket/transport"
)

// agentTLS is the agent's TLS flags.
type agentTLS struct {
	ca, cert, key, clientAuth string
}

func agentTLSFlags(fs *flag.FlagSet, o *agentOpts) {
	fs.StringVar(&o.tls.ca, "tls-ca", "", "PEM file of the cluster CA; with --tls-cert and --tls-key turns on TLS for the API and mutual TLS for Raft and every call between nodes (SIGHUP reloads the three files)")
	fs.StringVar(&o.tls.cert, "tls-cert", "", "PEM file of this node's server certificate (docket tls cert --server)")
	fs.StringVar(&o.tls.key, "tls-key", "", "PEM file of this node's private key")
	fs.StringVar(&o.tls.clientAuth, "tls-client-auth", "verify-if-given", "client API: require, verify-if-given or none (a client certificate from the CA)")
	fs.BoolVar(&o.api.Reflection, "reflection", false, "serve gRPC server reflection (grpcurl's service listing); off: it maps the API for anyone who connects")
}

// setupTLS loads the TLS material the flags name, if any, into the node's
// and the API's configs. It returns nil when TLS is off.
func setupTLS(o *agentOpts, cfg *cluster.Config, api *transport.Config, log *slog.Logger) (*certs.Reloader, error) {
	t := o.tls
	if t.ca == "" && t.cert == "" && t.key == "" {
		if t.clientAuth != "verify-if-given" {
			return nil, fmt.Errorf("%w: --tls-client-auth needs --tls-ca, --tls-cert and --tls-key", errUsage)
		}
		return nil, nil
	}
	if t.ca == "" || t.cert == "" || t.key == "" {
		return nil, fmt.Errorf("%w: --tls-ca, --tls-cert and --tls-key go together", errUsage)
	}
	auth, err := certs.ParseClientAuth(t.clientAuth)
	if err != nil {
		return nil, fmt.Errorf("%w: --tls-client-auth: %v", errUsage, err)
	}
	r, err := certs.Load(certs.Files{CA: t.ca, Cert: t.cert, Key: t.key}, log)
	if err != nil {
		return nil, err
	}
	cfg.TLS, api.TLS, api.ClientAuth = r, r, auth
	return r, nil
}

// reloadOnHUP reloads r on every signal from sig until ctx ends. Reload
// logs the outcome (and the new expiry); a failed reload keeps the old
// certificate.
func reloadOnHUP(ctx context.Context, sig <-chan os.Signal, r *certs.Reloader, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			if r == nil {
				log.Info("SIGHUP: nothing to reload (TLS is off)")
				continue
			}
			_ = r.Reload() // logged by Reload; the old certificate stays on error
		}
	}
}

// watchHUP starts reloadOnHUP on SIGHUP until ctx ends. Catching SIGHUP
// also keeps it from ending the process, its default action.
func watchHUP(ctx context.Context, r *certs.Reloader, log *slog.Logger) func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); reloadOnHUP(ctx, ch, r, log) }()
	return func() { signal.Stop(ch); cancel(); <-done }
}
