package jepsen

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dockethq/docket/client"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Creds are what a client process of the harness (the workload, the
// leader and health helpers) needs to reach a secure cluster: the CA, a
// client certificate, and the file of each role's token. The controller
// passes them as flags (files, never secrets, in argv). The zero value is
// the plain mode.
type Creds struct {
	CA, Cert, Key string
	Tokens        map[string]string // role -> file holding the secret
}

// Secure reports whether the credentials ask for TLS.
func (cr Creds) Secure() bool { return cr.CA != "" }

// Flags registers the flags Args writes.
func (cr *Creds) Flags(fs *flag.FlagSet) {
	fs.StringVar(&cr.CA, "tls-ca", "", "PEM file of the cluster CA (empty: plaintext)")
	fs.StringVar(&cr.Cert, "tls-cert", "", "PEM file of the client certificate")
	fs.StringVar(&cr.Key, "tls-key", "", "PEM file of the client certificate's key")
	fs.Func("token-file", "ROLE=FILE: the token of ROLE is in FILE (repeatable)", func(v string) error {
		role, file, ok := strings.Cut(v, "=")
		if !ok || role == "" || file == "" {
			return fmt.Errorf("want ROLE=FILE, got %q", v)
		}
		if cr.Tokens == nil {
			cr.Tokens = map[string]string{}
		}
		cr.Tokens[role] = file
		return nil
	})
}

// Args are the flags that give a child process these credentials.
func (cr Creds) Args() []string {
	if !cr.Secure() {
		return nil
	}
	args := []string{"--tls-ca", cr.CA, "--tls-cert", cr.Cert, "--tls-key", cr.Key}
	roles := make([]string, 0, len(cr.Tokens))
	for r := range cr.Tokens {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, r := range roles {
		args = append(args, "--token-file", r+"="+cr.Tokens[r])
	}
	return args
}

// secret reads role's token; "" for role "" (no token wanted).
func (cr Creds) secret(role string) (string, error) {
	if role == "" || !cr.Secure() || len(cr.Tokens) == 0 {
		return "", nil // no tokens at all: TLS without --auth (the rolling upgrade)
	}
	file, ok := cr.Tokens[role]
	if !ok {
		return "", fmt.Errorf("no %s token given (--token-file %s=FILE)", role, role)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s token: %w", role, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s token file %s is empty", role, file)
	}
	return s, nil
}

// ClientOptions are the client options of a caller with role's token
// (none in the plain mode). Calls that name a task carry Tenant.
func (cr Creds) ClientOptions(role string) ([]client.Option, error) {
	opts := []client.Option{client.WithRequestTenant(Tenant)}
	if !cr.Secure() {
		return opts, nil
	}
	tok, err := cr.secret(role)
	if err != nil {
		return nil, err
	}
	opts = append(opts, client.WithTLS(cr.CA, cr.Cert, cr.Key))
	if tok != "" {
		opts = append(opts, client.WithToken(tok))
	}
	return opts, nil
}

// Dial opens a raw gRPC connection to addr (for the per-node reads and
// health checks the client does not offer) that sends role's token on
// every call; role "" sends none.
func (cr Creds) Dial(addr, role string) (*grpc.ClientConn, error) {
	if !cr.Secure() {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	cfg, err := client.TLSConfig(cr.CA, cr.Cert, cr.Key)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}
	tok, err := cr.secret(role)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if tok != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(tok)))
	}
	return grpc.NewClient(addr, opts...)
}

// bearer sends a token as the client package does; unlike it, only over
// TLS, since the harness never sends one in the clear.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{docketv1.MetadataAuthorization: "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }
