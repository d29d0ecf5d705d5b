package jepsen

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/client"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Tenant is the tenant of every task the workload enqueues, in both
// modes: the secure mode's producer, worker and reader tokens grant their
// role over it alone, so each call is checked against a tenant that is not
// the default one.
const Tenant = "jepsen"

// Roles of the tokens the harness's clients use (cluster's role names).
const (
	RoleAdmin    = "admin"
	RoleProducer = "producer"
	RoleWorker   = "worker"
	RoleReader   = "reader"
)

// clientCertName is the file stem of the harness clients' certificate.
const clientCertName = "jepsen"

// tokenCreateTimeout bounds the wait for the first leader to create the
// bootstrap token and for the role tokens to be created with it.
const tokenCreateTimeout = 90 * time.Second

// Security is a run's secure mode, made the way an operator would make it
// (README, "Run it securely"): the built binary's `docket tls ca` and
// `docket tls cert` write a CA, a server certificate per node and one
// client certificate into Dir; the bootstrap admin secret is written to a
// file there (0600) that the agents read with --bootstrap-token-file; once
// a leader has created the bootstrap token, `docket token create` makes a
// producer, a worker and a reader token for Tenant. A nil *Security is the
// plain mode (--insecure).
type Security struct {
	Dir        string
	bootSecret string
	// NoAuth runs TLS and gossip encryption without --auth and tokens: a
	// cluster that starts on a build below the token level cannot create
	// any (the rolling upgrade).
	NoAuth bool
}

// NewSecurity creates dir (0700) and the CA, certificates and bootstrap
// secret of an n-node run, with bin (the docket binary). Each server
// certificate also names its node's test address, which is what clients
// dial and check.
func NewSecurity(ctx context.Context, bin, dir string, n int) (*Security, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("security dir: %w", err)
	}
	s := &Security{Dir: dir}
	steps := [][]string{{"tls", "ca", "--dir", dir}}
	for i := 1; i <= n; i++ {
		steps = append(steps, []string{"tls", "cert", "--server", "--name", "n" + strconv.Itoa(i), "--ip", nodeIP(i), "--dir", dir})
	}
	steps = append(steps, []string{"tls", "cert", "--client", "--name", clientCertName, "--dir", dir})
	for _, st := range steps {
		if _, err := run(ctx, bin, st...); err != nil {
			return nil, fmt.Errorf("security: %w", err)
		}
	}
	// Gossip is encrypted as an operator's would be (README, "Gossip
	// keys"): the binary makes the key, the agents read it from a file.
	if _, err := run(ctx, bin, "gossip", "keygen", "--out", s.GossipKeyFile()); err != nil {
		return nil, fmt.Errorf("security: %w", err)
	}
	var b [32]byte
	if _, err := crand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("bootstrap secret: %w", err)
	}
	s.bootSecret = base64.RawURLEncoding.EncodeToString(b[:])
	if err := os.WriteFile(s.BootTokenFile(), []byte(s.bootSecret+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("bootstrap secret: %w", err)
	}
	return s, nil
}

// CAFile is the cluster CA's certificate (`docket tls ca` names it).
func (s *Security) CAFile() string { return filepath.Join(s.Dir, "docket-ca.pem") }

// GossipKeyFile holds the gossip key every agent encrypts with.
func (s *Security) GossipKeyFile() string { return filepath.Join(s.Dir, "gossip.key") }

// BootTokenFile holds the bootstrap admin token's secret.
func (s *Security) BootTokenFile() string { return filepath.Join(s.Dir, "bootstrap.token") }

// TokenFile holds the secret of the token of role (the bootstrap token
// for admin).
func (s *Security) TokenFile(role string) string {
	if role == RoleAdmin {
		return s.BootTokenFile()
	}
	return filepath.Join(s.Dir, role+".token")
}

func (s *Security) certFiles(name string) (cert, key string) {
	return filepath.Join(s.Dir, name+".pem"), filepath.Join(s.Dir, name+"-key.pem")
}

// agentArgs are node id's TLS and auth flags. The bootstrap secret goes by
// file, never in argv (ps, /debug/pprof/cmdline). --tls-client-auth
// require: every client of the harness holds a certificate of the CA, so
// the strictest setting costs nothing and is the one to test.
func (s *Security) agentArgs(id string) []string {
	cert, key := s.certFiles(id)
	args := []string{"--tls-ca", s.CAFile(), "--tls-cert", cert, "--tls-key", key,
		"--tls-client-auth", "require", "--gossip-key-file", s.GossipKeyFile()}
	if s.NoAuth {
		return args
	}
	return append(args, "--auth", "--bootstrap-token-file", s.BootTokenFile())
}

// agentEnv is an agent's environment: the harness's own, without any
// Docket secret, plus the bootstrap secret as DOCKET_TOKEN, the join token
// a wiped node shows to AddServer (admin over "*") when it rejoins.
func (s *Security) agentEnv() []string {
	return append(withoutSecrets(os.Environ()), "DOCKET_TOKEN="+s.bootSecret)
}

// withoutSecrets is env without the variables Docket reads secrets from,
// so that a token in the harness's own environment reaches no child.
func withoutSecrets(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "DOCKET_TOKEN=") && !strings.HasPrefix(kv, "DOCKET_BOOTSTRAP_TOKEN=") {
			out = append(out, kv)
		}
	}
	return out
}

// Creds are the credentials of a client process of the harness that holds
// the given roles' tokens.
func (s *Security) Creds(roles ...string) Creds {
	cert, key := s.certFiles(clientCertName)
	cr := Creds{CA: s.CAFile(), Cert: cert, Key: key, Tokens: map[string]string{}}
	if s.NoAuth {
		return cr
	}
	for _, r := range roles {
		cr.Tokens[r] = s.TokenFile(r)
	}
	return cr
}

// CreateTokens makes the producer, worker and reader tokens for Tenant
// with `docket token create`, run in the control namespace with the
// bootstrap secret in DOCKET_TOKEN, and writes each secret to its
// TokenFile (0600). It retries until tokenCreateTimeout: the bootstrap
// token exists only once the first leader has committed it.
func (s *Security) CreateTokens(ctx context.Context, c *Cluster) error {
	return s.createTokens(ctx, []string{"ip", "netns", "exec", c.Net.CtlNS(), c.Bin}, c.GRPCAddrs())
}

// createTokens runs `docket token create` with the command line prefix
// docket (the binary, or ip netns exec and the binary) against addrs.
func (s *Security) createTokens(ctx context.Context, docket, addrs []string) error {
	ctx, cancel := context.WithTimeout(ctx, tokenCreateTimeout)
	defer cancel()
	cert, key := s.certFiles(clientCertName)
	for _, role := range []string{RoleProducer, RoleWorker, RoleReader} {
		args := append(append([]string(nil), docket...), "token", "create", "--json",
			"--name", "jepsen-"+role, "--roles", role, "--tenants", Tenant, "--timeout", "5s",
			"--addr", strings.Join(addrs, ","), "--tls-ca", s.CAFile(), "--tls-cert", cert, "--tls-key", key)
		var lastErr error
		for ctx.Err() == nil {
			secret, err := s.createToken(ctx, args)
			if err == nil {
				if err := os.WriteFile(s.TokenFile(role), []byte(secret+"\n"), 0o600); err != nil {
					return fmt.Errorf("token %s: %w", role, err)
				}
				lastErr = nil
				break
			}
			lastErr = err
			sleepCtx(ctx, 500*time.Millisecond)
		}
		if lastErr != nil || ctx.Err() != nil {
			return fmt.Errorf("create %s token within %s: %w", role, tokenCreateTimeout, errors.Join(lastErr, ctx.Err()))
		}
	}
	return nil
}

func (s *Security) createToken(ctx context.Context, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Env = s.agentEnv()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docket token create: %w: %s", err, strings.TrimSpace(errOut.String()))
	}
	var resp struct {
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil || resp.Secret == "" {
		return "", fmt.Errorf("docket token create: no secret in its answer (%v)", err)
	}
	return resp.Secret, nil
}

// errAuthNotEnforced: a secure run whose nodes let a call through that its
// token's role does not allow, or a call without a token. The run would
// otherwise pass while testing nothing of the secure path.
var errAuthNotEnforced = errors.New("secure mode: the cluster does not enforce tokens")

// checkAuthEnforced asks the cluster, before the workload starts, for
// three things its tokens must not allow: a claim with the producer token,
// an enqueue with the worker token and a read without a token. Each must
// be refused (PermissionDenied, PermissionDenied, Unauthenticated). A
// token created a moment ago may be unknown to a follower that lags
// (Unauthenticated), so each probe is retried until refused as expected
// or until ctx ends: give ctx a deadline.
func checkAuthEnforced(ctx context.Context, producer, worker *client.Client, anon *grpc.ClientConn) error {
	probes := []struct {
		what string
		want error
		call func(context.Context) error
	}{
		{"claim with the producer token", client.ErrPermissionDenied, func(c context.Context) error {
			_, err := producer.Claim(c, &docketv1.ClaimRequest{Queue: Queue, Tenant: Tenant, WorkerId: "auth-probe", LeaseNs: int64(time.Second), MaxTasks: 1})
			return err
		}},
		{"enqueue with the worker token", client.ErrPermissionDenied, func(c context.Context) error {
			_, err := worker.EnqueueOne(c, Queue, []byte("auth-probe"), client.TaskTenant(Tenant), client.TaskIdempotencyKey("auth-probe"))
			return err
		}},
		{"read without a token", nil, func(c context.Context) error {
			_, err := docketv1.NewQueueClient(anon).GetTask(c, &docketv1.GetTaskRequest{TaskId: "1", Tenant: Tenant, AllowStale: true})
			if status.Code(err) == codes.Unauthenticated {
				return nil
			}
			return fmt.Errorf("answered %v, want Unauthenticated", err)
		}},
	}
	for _, p := range probes {
		var err error
		for ctx.Err() == nil {
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = p.call(c)
			cancel()
			if p.want == nil && err == nil || p.want != nil && errors.Is(err, p.want) {
				break
			}
			sleepCtx(ctx, 200*time.Millisecond)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s: %v", errAuthNotEnforced, p.what, err)
		}
	}
	return nil
}
