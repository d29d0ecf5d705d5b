package transport

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Tokens a follower's replica does not know. The replica may lag the
// leader (a token created a moment ago), so its "unknown" is not final,
// and revoked tokens are unknown too. The follower asks the leader
// (Cluster.CheckToken, with the caller's token as the call's own): the
// leader's yes or no is final; a leader that moved names the new one, and
// the caller is sent there. A no is kept for tokenCheckTTL, since a
// secret the leader does not know never becomes one it knows (the leader
// mints them). A yes is not kept: it is asked for only until the replica
// applies the token, and a kept yes would outlive a revoke the replica
// has applied.

// ErrTokenUnchecked is Unavailable: a follower's replica does not know
// the call's token and no leader could be asked about it. Nothing was
// done; retry in a moment, or on another node.
var ErrTokenUnchecked = errors.New("token unknown to this replica, and no leader could be asked about it")

const (
	// tokenCheckTTL is how long a follower keeps the leader's "unknown":
	// a burst of calls with one bad token costs one leader call.
	tokenCheckTTL = 2 * time.Second
	// tokenCheckTimeout bounds one call to the leader.
	tokenCheckTimeout = 2 * time.Second
	// tokenCheckMax bounds the answers kept, and tokenCheckInflight the
	// leader calls at once: a caller with made-up tokens cannot make a
	// follower hold or send more.
	tokenCheckMax      = 4096
	tokenCheckInflight = 8
)

type tokenAnswer struct {
	at time.Time
}

// tokenChecks is a follower's cache of the leader's "unknown" answers,
// keyed by the secret's SHA-256.
type tokenChecks struct {
	mu   sync.Mutex
	seen map[[32]byte]tokenAnswer
	sem  chan struct{}
}

func newTokenChecks() *tokenChecks {
	return &tokenChecks{seen: map[[32]byte]tokenAnswer{}, sem: make(chan struct{}, tokenCheckInflight)}
}

func (c *tokenChecks) get(key [32]byte, now time.Time) (tokenAnswer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.seen[key]
	if ok && now.Sub(a.at) >= tokenCheckTTL {
		delete(c.seen, key)
		return tokenAnswer{}, false
	}
	return a, ok
}

func (c *tokenChecks) put(key [32]byte, a tokenAnswer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) >= tokenCheckMax {
		for k, old := range c.seen {
			if a.at.Sub(old.at) >= tokenCheckTTL {
				delete(c.seen, k)
			}
		}
		if len(c.seen) >= tokenCheckMax {
			clear(c.seen) // all fresh: a flood of made-up tokens; ask again
		}
	}
	c.seen[key] = a
}

// askLeader is the leader's answer about secret: the token, an error that
// wraps service.ErrUnknownToken, a not-leader error naming where the
// leader moved, or ErrTokenUnchecked.
func (s *Server) askLeader(ctx context.Context, secret string) (*pb.Token, error) {
	key := sha256.Sum256([]byte(secret))
	if _, ok := s.tokens.get(key, time.Now()); ok {
		return nil, fmt.Errorf("%w (the leader's answer)", service.ErrUnknownToken)
	}
	hint := s.svc.LeaderGRPCAddr()
	if hint == "" {
		return nil, fmt.Errorf("%w: no leader is known; retry in a moment", ErrTokenUnchecked)
	}
	select {
	case s.tokens.sem <- struct{}{}:
		defer func() { <-s.tokens.sem }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cc, err := s.fwd.Conn(hint)
	if err != nil {
		return nil, fmt.Errorf("%w: the leader at %s: %w", ErrTokenUnchecked, hint, err)
	}
	cctx, cancel := context.WithTimeout(ctx, tokenCheckTimeout)
	defer cancel()
	cctx = metadata.NewOutgoingContext(cctx, metadata.Pairs(
		pb.MetadataAuthorization, "Bearer "+secret, pb.MetadataForwarded, "1"))
	if id := s.node.Identity().ID(); id != "" {
		cctx = metadata.AppendToOutgoingContext(cctx, pb.MetadataCluster, id)
	}
	resp := &pb.CheckTokenResponse{}
	err = cc.Invoke(cctx, pb.Cluster_CheckToken_FullMethodName, &pb.CheckTokenRequest{}, resp)
	switch st := status.Convert(err); {
	case err == nil && resp.GetToken() != nil:
		return resp.GetToken(), nil
	case st.Code() == codes.Unauthenticated:
		s.tokens.put(key, tokenAnswer{at: time.Now()})
		return nil, fmt.Errorf("%w (the leader's answer)", service.ErrUnknownToken)
	case st.Code() == codes.Unavailable && leaderOfStatus(st) != "":
		// The leader moved: the caller retries where the old one says.
		return nil, fmt.Errorf("token unknown to this replica: %w", &notLeaderError{LeaderGRPC: leaderOfStatus(st)})
	case ctx.Err() != nil:
		return nil, ctx.Err()
	default:
		return nil, fmt.Errorf("%w: the leader at %s: %s", ErrTokenUnchecked, hint, st.Message())
	}
}

// leaderOfStatus is the leader a NOT_LEADER status names, or "".
func leaderOfStatus(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(interface {
			GetReason() string
			GetMetadata() map[string]string
		}); ok && info.GetReason() == pb.ReasonNotLeader {
			return info.GetMetadata()[pb.ErrorInfoLeaderKey]
		}
	}
	return ""
}

// CheckToken answers the call's own token as this node's replica holds it,
// without its hash. The interceptor authenticated it (and holds it to no
// role or tenant); a node that does not lead answers not-leader, so only a
// leader's "unknown" reaches a follower as final.
func (c *clusterService) CheckToken(ctx context.Context, _ *pb.CheckTokenRequest) (*pb.CheckTokenResponse, error) {
	tok := tokenOf(ctx)
	if tok == nil {
		return nil, fmt.Errorf("%w: auth is off on %s, so it knows no tokens", ErrTokenUnchecked, c.s.node.Identity().ID())
	}
	out := proto.Clone(tok).(*pb.Token)
	out.SecretHash = nil
	return &pb.CheckTokenResponse{Token: out}, nil
}
