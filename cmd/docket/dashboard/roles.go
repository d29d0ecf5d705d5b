package dashboard

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// The dashboard shows an action only to a viewer whose token may do it.
// The API has no call that names a token's roles, so the dashboard asks
// one it may answer: ListDead of the tenant with a limit of 1 needs the
// admin role over that tenant, as every action does (pause, resume,
// purge, cancel, requeue; reprioritise also allows a producer, whom the
// pages do not serve: Stats needs reader or admin). The answer is cached
// for roleTTL, so a page costs at most one such read per tenant shown and
// a revoked role shows its buttons for at most that long (the API refuses
// them anyway, and the page says so).

// roleTTL is how long an answer of the admin probe is kept.
const roleTTL = 15 * time.Second

// maxRoleEntries bounds the cache; past it, it starts afresh.
const maxRoleEntries = 4096

// maxProbedTenants bounds the probes of one page; tenants past it show
// their actions and let the API decide.
const maxProbedTenants = 8

type roleKey struct {
	token  [sha256.Size]byte
	tenant string
}

type roleEntry struct {
	admin bool
	at    time.Time
}

type roleCache struct {
	mu sync.Mutex
	m  map[roleKey]roleEntry
}

func newRoleCache() *roleCache { return &roleCache{m: map[roleKey]roleEntry{}} }

// adminOf reports whether the viewer may act on tenant's queues and
// tasks. With auth off everyone may. A failure of the probe other than a
// refusal counts as "may": the button shows and the API decides.
func (s *Server) adminOf(v *view, tenant string) bool {
	if !s.cfg.Auth {
		return true
	}
	if tenant == "" {
		tenant = pb.DefaultTenant
	}
	k := roleKey{token: sha256.Sum256([]byte(v.secret)), tenant: tenant}
	c := s.roles
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && time.Since(e.at) < roleTTL {
		return e.admin
	}
	ctx, cancel := context.WithTimeout(v.ctx, callTimeout)
	defer cancel()
	_, err := pb.NewQueueClient(s.conn).ListDead(ctx, &pb.ListDeadRequest{Tenant: tenant, Limit: 1})
	switch status.Code(err) {
	case codes.OK:
		e = roleEntry{admin: true, at: time.Now()}
	case codes.PermissionDenied, codes.Unauthenticated:
		e = roleEntry{admin: false, at: time.Now()}
	default:
		return true
	}
	c.mu.Lock()
	if len(c.m) >= maxRoleEntries {
		clear(c.m)
	}
	c.m[k] = e
	c.mu.Unlock()
	return e.admin
}

// adminTenants is adminOf for each tenant of a page, probing at most
// maxProbedTenants of them.
func (s *Server) adminTenants(v *view, tenants []string) map[string]bool {
	out := map[string]bool{}
	for _, t := range tenants {
		if _, done := out[t]; done {
			continue
		}
		if len(out) >= maxProbedTenants {
			out[t] = true
			continue
		}
		out[t] = s.adminOf(v, t)
	}
	return out
}
