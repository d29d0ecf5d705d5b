package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster/gossip"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/cmd/docket/tlsgen"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// TokenFileName is the file in the data dir that holds the bootstrap admin
// token's secret when Options.Auth is set.
const TokenFileName = "admin.token"

// certDays is the validity of the throwaway certificates. A kept data dir
// reuses them, so they outlive one run; a year is long for a dev cluster.
const certDays = 365

// makeTLS gives the cluster its CA, a server certificate per node and a
// client certificate in dir, reusing the files a previous run left there,
// so that a restarted cluster keeps the CA its clients already trust.
func (c *Cluster) makeTLS(dir string) (map[string][2]string, error) {
	ca := filepath.Join(dir, tlsgen.CAFile)
	if !exists(ca) {
		var err error
		if ca, _, err = tlsgen.CA(dir, certDays); err != nil {
			return nil, err
		}
	}
	pair := func(name string, server bool) ([2]string, error) {
		crt, key := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		if exists(crt) && exists(key) {
			return [2]string{crt, key}, nil
		}
		crt, key, err := tlsgen.Cert(tlsgen.CertOptions{Dir: dir, Name: name, Server: server, Days: certDays})
		return [2]string{crt, key}, err
	}
	servers := map[string][2]string{}
	for _, n := range c.Nodes {
		p, err := pair(n.ID, true)
		if err != nil {
			return nil, err
		}
		servers[n.ID] = p
	}
	p, err := pair("client", false)
	if err != nil {
		return nil, err
	}
	c.TLS = &TLSFiles{CA: ca, Cert: p[0], Key: p[1]}
	return servers, nil
}

// makeToken reads the bootstrap admin secret from dir/admin.token, or mints
// one and writes it there (0600) on the first run. The nodes read the file
// (--bootstrap-token-file), never a flag, so the secret is in no command line.
func (c *Cluster) makeToken(dir string) error {
	path := filepath.Join(dir, TokenFileName)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if c.Token = strings.TrimSpace(string(b)); c.Token == "" {
			return fmt.Errorf("%s is empty: delete it, or the data dir, for a new cluster", path)
		}
	case errors.Is(err, fs.ErrNotExist):
		if c.Token, err = service.NewSecret(); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(c.Token+"\n"), 0o600); err != nil {
			return fmt.Errorf("write admin token: %w", err)
		}
	default:
		return fmt.Errorf("read admin token: %w", err)
	}
	c.TokenFile = path
	return nil
}

// GossipKeyFileName holds a secure cluster's gossip key.
const GossipKeyFileName = "gossip.key"

// makeGossipKey reads dir/gossip.key, or writes a fresh key there (0600)
// on the first run, and returns its path: a secure cluster's gossip is
// encrypted too, so a process that only reaches the gossip port cannot
// join the pool (and be added as a non-voter).
func makeGossipKey(dir string) (string, error) {
	path := filepath.Join(dir, GossipKeyFileName)
	if exists(path) {
		return path, nil
	}
	key, err := gossip.NewKey()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write gossip key: %w", err)
	}
	return path, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// waitServing polls until every node serves the Queue API on its own:
// its health says SERVING for the Queue service (it knows a leader, has
// no problem, and a restarted node has passed its consistency check) and
// it answers a stale GetTask itself, with the admin token when there is
// one (each node authenticates from its own replica, so a node that has
// not applied the bootstrap token yet would refuse a user's first call).
func (c *Cluster) waitServing(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for _, n := range c.Nodes {
		for {
			err := c.tryNode(ctx, n.GRPC)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				// A kept cluster bootstraps its token once: an admin.token
				// replaced since then is not the one it knows.
				if c.Token != "" {
					return fmt.Errorf("%s did not serve the Queue API or accept the admin token in %s within %v: %w (last: %v; logs in %s)", n.ID, c.TokenFile, d, ctx.Err(), err, c.Dir)
				}
				return fmt.Errorf("%s did not serve the Queue API within %v: %w (last: %v; logs in %s)", n.ID, d, ctx.Err(), err, c.Dir)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// Serving reports whether the node at addr serves the Queue API now
// (waitServing's test), for a node restarted by hand.
func (c *Cluster) Serving(ctx context.Context, addr string) bool { return c.tryNode(ctx, addr) == nil }

// tryNode asks the node at addr, and only it, for its Queue service's
// health and for a task with a stale read, which that node authenticates
// and answers from its own replica: NotFound means it serves, and
// accepted the token.
func (c *Cluster) tryNode(ctx context.Context, addr string) error {
	creds := insecure.NewCredentials()
	if c.TLS != nil {
		cfg, err := client.TLSConfig(c.TLS.CA, c.TLS.Cert, c.TLS.Key)
		if err != nil {
			return err
		}
		creds = credentials.NewTLS(cfg)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	if c.Token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, pb.MetadataAuthorization, "Bearer "+c.Token)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	h, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: pb.Queue_ServiceDesc.ServiceName})
	if err == nil && h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		err = fmt.Errorf("%s: health %v", addr, h.GetStatus())
	}
	if err == nil {
		_, err = pb.NewQueueClient(cc).GetTask(ctx, &pb.GetTaskRequest{TaskId: "00000000000000000000", AllowStale: true})
		if status.Code(err) == codes.NotFound {
			err = nil
		}
	}
	return errors.Join(err, cc.Close())
}
