package service

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Authentication and authorization: who may call what. Tokens are FSM
// state (fsm/rules_auth.go); this file is the one place that decides what
// a token's roles allow. The API layer (transport) asks it for every call.

var (
	// ErrUnauthenticated: no token, or one the cluster does not know
	// (never created, revoked) or that has expired.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrUnknownToken is ErrUnauthenticated for a token this replica does
	// not hold: never created, revoked, or created after what this node
	// applied. Only the leader's answer is final (transport sends the
	// caller there).
	ErrUnknownToken = fmt.Errorf("%w: unknown or revoked token", ErrUnauthenticated)
	// ErrPermissionDenied: a valid token whose roles or tenants do not
	// allow the call.
	ErrPermissionDenied = errors.New("permission denied")
)

// Authenticate finds the token whose secret is secret in the local
// replica and checks its expiry against this node's clock. The read is
// local and may be stale: authentication must not cost a quorum round per
// call. So a token created a moment ago may be unknown on a lagging
// follower: it answers ErrUnknownToken, which transport turns into
// NOT_LEADER so the client asks the leader; a revoked one is accepted by a node
// until it applies the revoke; a request that node forwards is checked
// again by the leader, which applied the revoke before acknowledging it,
// so a revoke is complete for writes and linearizable reads when
// acknowledged, and for stale reads once each node applied it.
func (s *Service) Authenticate(secret string) (*pb.Token, error) {
	if secret == "" {
		return nil, fmt.Errorf("%w: no token", ErrUnauthenticated)
	}
	if s.r.IsLeader() && !s.r.LeaderCaughtUp() {
		// A leader that has not applied what earlier leaders committed
		// may not have applied an acknowledged revoke: its answer would
		// not be final. The caller retries in a moment, as for a leader
		// change.
		return nil, fmt.Errorf("%w: the new leader is applying what earlier leaders committed", &replica.NotLeaderError{})
	}
	tok, err := s.r.FSM().TokenByHash(fsm.HashSecret(secret))
	if errors.Is(err, pb.ErrNotFound) {
		return nil, ErrUnknownToken
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	if exp := tok.GetExpiresAt(); exp != 0 && s.r.Now().UnixNano() >= exp {
		return nil, fmt.Errorf("%w: token expired", ErrUnauthenticated)
	}
	return tok, nil
}

// GrantsTenant reports whether tok names tenant, or every tenant.
func GrantsTenant(tok *pb.Token, tenant string) bool {
	return slices.Contains(tok.GetTenants(), pb.AllTenants) || slices.Contains(tok.GetTenants(), tenant)
}

// OwnTask is ErrNotFound when tenant is set and the task is another
// tenant's: the caller learns nothing a missing id would not tell it.
func OwnTask(t *pb.Task, tenant string) error {
	if tenant != "" && t.GetTenant() != tenant {
		return fmt.Errorf("get %s: %w", t.GetId(), pb.ErrNotFound)
	}
	return nil
}

// randomString is n random bytes, URL-safe base64.
func randomString(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// NewSecret mints a token secret: 32 random bytes.
func NewSecret() (string, error) { return randomString(32) }

func newAccessor() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// CreateToken mints an accessor and a secret on this node (the leader),
// stores the token with the secret's hash through Raft, and returns the
// secret: the only time it is shown.
func (s *Service) CreateToken(ctx context.Context, req *pb.CreateTokenRequest) (*pb.CreateTokenResponse, error) {
	secret, err := NewSecret()
	if err != nil {
		return nil, err
	}
	var exp int64
	if ttl := req.GetTtlNs(); ttl < 0 {
		return nil, &pb.FieldError{Field: "ttl_ns", Reason: "negative"}
	} else if ttl > 0 {
		exp = s.r.Now().Add(time.Duration(ttl)).UnixNano()
	}
	acc, err := s.createToken(ctx, &pb.Token{Name: req.GetName(), Roles: req.GetRoles(), Tenants: req.GetTenants(), ExpiresAt: exp}, secret)
	if err != nil {
		return nil, err
	}
	return &pb.CreateTokenResponse{Accessor: acc, Secret: secret, ExpiresAt: exp}, nil
}

// createToken proposes tok with secret's hash and a new accessor.
func (s *Service) createToken(ctx context.Context, tok *pb.Token, secret string) (string, error) {
	acc, err := newAccessor()
	if err != nil {
		return "", err
	}
	tok.Accessor, tok.SecretHash = acc, fsm.HashSecret(secret)
	cmd := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CREATE_TOKEN, Body: &pb.Command_CreateToken{CreateToken: &pb.CreateTokenCmd{Token: tok}}}
	if err := s.Check(cmd); err != nil {
		return "", err
	}
	res, err := s.Propose(ctx, cmd)
	if err != nil {
		return "", err
	}
	if err := pb.ResultError(res); err != nil {
		return "", err
	}
	if len(res.GetItems()) != 1 {
		return "", fmt.Errorf("create token: fsm answered %d items", len(res.GetItems()))
	}
	switch it := res.GetItems()[0]; it.GetCode() {
	case pb.Code_CODE_OK:
		return acc, nil
	case pb.Code_CODE_ALREADY_DONE:
		return "", ErrBootstrapped
	default:
		return "", fmt.Errorf("create token: %v: %s", it.GetCode(), it.GetDetail())
	}
}

// ErrBootstrapped: the cluster already created its bootstrap token once.
var ErrBootstrapped = errors.New("bootstrap token already created")

// Bootstrap creates the bootstrap admin token (every role over every
// tenant) from secret, on the leader, once in the cluster's life: later
// calls, and calls after it was revoked, answer ErrBootstrapped.
func (s *Service) Bootstrap(ctx context.Context, secret string) error {
	if done, err := s.r.FSM().Bootstrapped(); err != nil {
		return err
	} else if done {
		return ErrBootstrapped
	}
	_, err := s.createToken(ctx, &pb.Token{Name: "bootstrap", Roles: []string{pb.RoleAdmin, pb.RoleProducer, pb.RoleWorker, pb.RoleReader},
		Tenants: []string{pb.AllTenants}, Bootstrap: true}, secret)
	return err
}

// RevokeToken deletes a token through Raft: every node refuses it once it
// applied the entry. ErrNotFound when there is no such token.
func (s *Service) RevokeToken(ctx context.Context, accessor string) error {
	cmd := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_REVOKE_TOKEN, Body: &pb.Command_RevokeToken{RevokeToken: &pb.RevokeTokenCmd{Accessor: accessor}}}
	if err := s.Check(cmd); err != nil {
		return err
	}
	res, err := s.Propose(ctx, cmd)
	if err != nil {
		return err
	}
	if err := pb.ResultError(res); err != nil {
		return err
	}
	if len(res.GetItems()) != 1 {
		return fmt.Errorf("revoke token: fsm answered %d items", len(res.GetItems()))
	}
	if it := res.GetItems()[0]; it.GetCode() != pb.Code_CODE_OK {
		return tokenNotFound{accessor: accessor}
	}
	return nil
}

// tokenNotFound is ErrNotFound worded for a token: ErrNotFound's own words
// name a task.
type tokenNotFound struct{ accessor string }

func (e tokenNotFound) Error() string {
	return "token not found: no token has accessor " + e.accessor
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e tokenNotFound) Is(target error) bool { return target == pb.ErrNotFound }

// ListTokens lists the tokens at consistency c, without secrets or
// hashes.
func (s *Service) ListTokens(ctx context.Context, c Consistency) ([]*pb.TokenInfo, error) {
	if err := s.readAt(ctx, c); err != nil {
		return nil, err
	}
	toks, err := s.r.FSM().Tokens()
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out := make([]*pb.TokenInfo, len(toks))
	for i, t := range toks {
		out[i] = &pb.TokenInfo{Accessor: t.GetAccessor(), Name: t.GetName(), Roles: t.GetRoles(), Tenants: t.GetTenants(),
			ExpiresAt: t.GetExpiresAt(), CreatedAt: t.GetCreatedAt(), Bootstrap: t.GetBootstrap()}
	}
	return out, nil
}

// TaskFor is t as the holder of tok may see it on GetTask, WaitResult and
// ListDead: the one rule for fences, which the dashboard shows as the API
// answers. A fence lets its holder submit, so:
//
//   - the task's current fence, and its open attempt's (the same claim),
//     are shown to no token holder: only the worker holding the claim has
//     it, from Claim's answer;
//   - the fences of ended attempts are shown to admins of the task's
//     tenant (they are history: every Submit, Heartbeat or Nack with one
//     is refused as stale), and to no other role;
//   - with auth off (tok nil) nothing is hidden, as before: the fence of a
//     task was always on GetTask's answer there.
//
// t itself is not changed; a copy is returned when something is hidden.
func TaskFor(tok *pb.Token, t *pb.Task) *pb.Task {
	if tok == nil || t == nil {
		return t
	}
	return hideFences(t, !isAdminOf(tok, t.GetTenant()))
}

// ListedTaskFor is TaskFor for ListTasks, whose answers are for watching:
// the current fence and the open attempt's are dropped for every caller,
// auth on or off; ended attempts' fences follow TaskFor.
func ListedTaskFor(tok *pb.Token, t *pb.Task) *pb.Task {
	if t == nil {
		return t
	}
	return hideFences(t, tok != nil && !isAdminOf(tok, t.GetTenant()))
}

// hideFences drops t's current fence and its open attempt's, and the
// ended attempts' too when past is set; it copies t only when it must.
func hideFences(t *pb.Task, past bool) *pb.Task {
	hide := func(a *pb.Attempt) bool { return a.GetFence() != 0 && (past || a.GetEndedAt() == 0) }
	if t.GetFence() == 0 && !slices.ContainsFunc(t.GetHistory(), hide) {
		return t
	}
	c := proto.Clone(t).(*pb.Task)
	c.Fence = 0
	for _, a := range c.GetHistory() {
		if hide(a) {
			a.Fence = 0
		}
	}
	return c
}

// isAdminOf reports whether tok has the admin role over tenant.
func isAdminOf(tok *pb.Token, tenant string) bool {
	return slices.Contains(tok.GetRoles(), pb.RoleAdmin) && GrantsTenant(tok, tenant)
}
