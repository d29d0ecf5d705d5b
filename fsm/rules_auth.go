package fsm

import (
	"crypto/sha256"
	"errors"
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Token rules. A token is stored under the SHA-256 of its secret (the
// secret itself never enters the log), with the roles it grants over its
// tenants. Who may call what is cluster's decision (cluster/auth.go); the
// FSM keeps the tokens well-formed and decides, the same on every
// replica, when one exists: from the CreateToken entry's index until the
// RevokeToken entry's.

// MaxTokenTenants bounds the tenants one token names.
const MaxTokenTenants = 64

// HashSecret is the SHA-256 of a token's secret, the only form of it the
// cluster stores.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

func validRole(r string) bool {
	switch r {
	case pb.RoleProducer, pb.RoleWorker, pb.RoleReader, pb.RoleAdmin:
		return true
	}
	return false
}

// validateCreateToken checks a token's shape; an expiry at or before at
// (the command's time, when known) is refused: a token born expired is a
// mistake, and the FSM judges it at the time the command runs.
func validateCreateToken(c *pb.CreateTokenCmd, at int64) error {
	t := c.GetToken()
	if t == nil {
		return fieldErr("token", "required")
	}
	if err := checkName("accessor", t.GetAccessor()); err != nil {
		return err
	}
	if len(t.GetSecretHash()) != sha256.Size {
		return fieldErr("secret_hash", "%d bytes, want %d", len(t.GetSecretHash()), sha256.Size)
	}
	if err := checkLen("name", t.GetName(), 0, MaxNameLen); err != nil {
		return err
	}
	roles := t.GetRoles()
	if err := checkCount("roles", len(roles), 1, 4); err != nil {
		return err
	}
	for i, r := range roles {
		if !validRole(r) {
			return fieldErr(fmt.Sprintf("roles[%d]", i), "unknown role %q; want producer, worker, reader or admin", r)
		}
	}
	tenants := t.GetTenants()
	if err := checkCount("tenants", len(tenants), 1, MaxTokenTenants); err != nil {
		return err
	}
	for i, tn := range tenants {
		if tn == pb.AllTenants {
			continue
		}
		if err := checkName(fmt.Sprintf("tenants[%d]", i), tn); err != nil {
			return err
		}
	}
	exp := t.GetExpiresAt()
	if exp < 0 || exp > MaxTime {
		return fieldErr("expires_at", "%d not in 0..%d", exp, MaxTime)
	}
	if exp != 0 && at > 0 && exp <= at {
		return fieldErr("expires_at", "%d is not after now (%d)", exp, at)
	}
	return nil
}

// getTaskOf is getTask for a caller of tenant: another tenant's task is
// absent, so that its id tells the caller nothing (no PermissionDenied,
// no state, no fence). An empty tenant (auth off, or the leader's own
// commands) checks nothing.
func (tx *txn) getTaskOf(id, tenant string) (*pb.Task, bool, error) {
	t, ok, err := tx.getTask(id)
	if err != nil || !ok {
		return nil, false, err
	}
	if tenant != "" && t.GetTenant() != tenant {
		return nil, false, nil
	}
	return t, true, nil
}

// createToken stores a token. An accessor or a secret already in use is
// DUPLICATE; a second bootstrap token in the cluster's life is
// ALREADY_DONE, so a leader that proposes it again after a restart or an
// election changes nothing.
func (tx *txn) createToken(c *pb.CreateTokenCmd, res *pb.CommandResult) error {
	t := c.GetToken()
	acc := t.GetAccessor()
	if t.GetBootstrap() {
		done, err := storage.Bootstrapped(tx.r)
		if err != nil {
			return err
		}
		if done {
			res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_ALREADY_DONE, TaskId: acc, Detail: "bootstrap token already created"})
			return nil
		}
	}
	if _, err := storage.GetTokenByAccessor(tx.r, acc); err == nil {
		res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_DUPLICATE, TaskId: acc, Detail: "accessor in use"})
		return nil
	} else if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if _, err := storage.GetTokenByHash(tx.r, t.GetSecretHash()); err == nil {
		res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_DUPLICATE, TaskId: acc, Detail: "secret in use"})
		return nil
	} else if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	stored := &pb.Token{
		Accessor: acc, SecretHash: t.GetSecretHash(), Name: t.GetName(),
		Roles: t.GetRoles(), Tenants: t.GetTenants(), ExpiresAt: t.GetExpiresAt(),
		CreatedAt: tx.now, Bootstrap: t.GetBootstrap(),
	}
	if err := storage.PutToken(&tx.b, stored); err != nil {
		return err
	}
	if t.GetBootstrap() {
		if err := tx.b.Set(storage.KeyBootstrapped, nil, nil); err != nil {
			return err
		}
	}
	res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_OK, TaskId: acc})
	return nil
}

// revokeToken deletes a token; from this entry on, no replica accepts it.
func (tx *txn) revokeToken(c *pb.RevokeTokenCmd, res *pb.CommandResult) error {
	acc := c.GetAccessor()
	t, err := storage.GetTokenByAccessor(tx.r, acc)
	if errors.Is(err, storage.ErrNotFound) {
		res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_NOT_FOUND, TaskId: acc, Detail: "no such token"})
		return nil
	}
	if err != nil {
		return err
	}
	if err := storage.DeleteToken(&tx.b, t); err != nil {
		return err
	}
	res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_OK, TaskId: acc})
	return nil
}

// TokenByHash reads the token whose secret hashes to hash from the local
// replica; ErrNotFound when there is none (never created, or revoked).
func (f *FSM) TokenByHash(hash []byte) (*pb.Token, error) {
	r, release, err := f.reader()
	if err != nil {
		return nil, err
	}
	defer release()
	t, err := storage.GetTokenByHash(r, hash)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, pb.ErrNotFound
	}
	return t, err
}

// Tokens lists every token of the local replica, in accessor order.
func (f *FSM) Tokens() ([]*pb.Token, error) {
	r, release, err := f.view()
	if err != nil {
		return nil, err
	}
	defer release()
	return storage.ListTokens(r)
}

// Bootstrapped reports whether the bootstrap token was ever created.
func (f *FSM) Bootstrapped() (bool, error) {
	r, release, err := f.reader()
	if err != nil {
		return false, err
	}
	defer release()
	return storage.Bootstrapped(r)
}
