package transport

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Cluster.Status with with_hash reads every key of the keyspace. Status is
// open without a token (nodes and load balancers call it), and a loop of
// hashed Status calls once cost a leader most of two cores and its clients
// a 600 ms p99. So, here:
//
//   - with Config.Auth on, a hash needs a token with the admin or reader
//     role over every tenant ("*"): it describes all of them, like the
//     cluster-wide reads those roles already grant. Status without the
//     hash, and check_index (a hash the node already stored), stay open.
//   - whoever asks, the node computes at most one hash per
//     Config.HashInterval, shared by every caller. A caller that arrives
//     while the last hash still describes the applied index gets it at
//     once; one that arrives while a hash is being computed waits for that
//     one; otherwise it waits until the interval since the last
//     computation has passed, and the first to wake computes for all.
//     Authorised loops therefore cost at most one keyspace read per
//     interval, and a waiting caller holds only a goroutine and a stream,
//     both bounded by the server's stream limits.

// hashCache computes the keyspace hash at most once per interval.
type hashCache struct {
	every time.Duration

	mu        sync.Mutex
	hash      string
	index     uint64        // FSM applied index read just before hash was computed
	started   time.Time     // when the last computation started; zero: never
	computing chan struct{} // closed when the computation in flight ends; nil: none

	// computed counts computations, for tests and the log.
	computed atomic.Uint64
}

func newHashCache(every time.Duration) *hashCache { return &hashCache{every: every} }

// get answers a hash for a caller that arrived now, and the FSM applied
// index it describes. applied reads the FSM's applied index; compute
// hashes the keyspace and returns the index it read before hashing.
func (c *hashCache) get(ctx context.Context, applied func() uint64, compute func() (string, uint64, error)) (string, uint64, error) {
	arrived := time.Now()
	for {
		cur := applied()
		c.mu.Lock()
		// A hash whose computation started after the caller arrived is as
		// fresh as one computed for it alone; so is one of the index the
		// FSM is still at.
		if c.hash != "" && c.computing == nil && (!c.started.Before(arrived) || c.index == cur) {
			h, i := c.hash, c.index
			c.mu.Unlock()
			return h, i, nil
		}
		if wait := c.computing; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return "", 0, fmt.Errorf("waiting for the keyspace hash: %w", ctx.Err())
			}
		}
		if next := c.started.Add(c.every); !c.started.IsZero() && time.Now().Before(next) {
			c.mu.Unlock()
			t := time.NewTimer(time.Until(next))
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
				return "", 0, fmt.Errorf("waiting %v for the next keyspace hash: %w", c.every, ctx.Err())
			}
		}
		done := make(chan struct{})
		c.computing, c.started = done, time.Now()
		c.mu.Unlock()

		c.computed.Add(1)
		h, i, err := compute()
		c.mu.Lock()
		c.computing = nil
		if err == nil {
			c.hash, c.index = h, i
		}
		c.mu.Unlock()
		close(done)
		if err != nil {
			return "", 0, err
		}
		return h, i, nil
	}
}

// allowHash refuses a with_hash Status whose caller's token does not hold
// the admin or reader role over every tenant, when auth is on.
// Unauthenticated: no, unknown or expired token; PermissionDenied: a
// token that does not cover the call.
func (s *Server) allowHash(ctx context.Context) error {
	if !s.cfg.Auth {
		return nil
	}
	tok, err := s.svc.Authenticate(bearer(ctx))
	if err != nil {
		return fmt.Errorf("Status with_hash needs a token: %w", err)
	}
	roleOK := false
	for _, r := range tok.GetRoles() {
		roleOK = roleOK || r == pb.RoleAdmin || r == pb.RoleReader
	}
	if !roleOK || !service.GrantsTenant(tok, pb.AllTenants) {
		return fmt.Errorf("%w: Status with_hash reads every tenant's keys and needs the %s or %s role over every tenant (%q)",
			service.ErrPermissionDenied, pb.RoleAdmin, pb.RoleReader, pb.AllTenants)
	}
	return nil
}

// statusWithHash is the node's Status with a keyspace hash from the cache,
// and the FSM applied index the hash describes in fsm_applied_index, so
// that the two always go together.
func (s *Server) statusWithHash(ctx context.Context) (*pb.StatusResponse, error) {
	if err := s.allowHash(ctx); err != nil {
		return nil, err
	}
	st, err := s.node.StatusWithHash(false)
	if err != nil {
		return nil, err
	}
	applied := func() uint64 {
		now, _ := s.node.StatusWithHash(false) // without the hash it reads only counters
		return now.GetFsmAppliedIndex()
	}
	h, i, err := s.hashes.get(ctx, applied, func() (string, uint64, error) {
		full, err := s.node.StatusWithHash(true)
		if err != nil {
			return "", 0, fmt.Errorf("keyspace hash: %w", err)
		}
		return full.GetKeyspaceHash(), full.GetFsmAppliedIndex(), nil
	})
	if err != nil {
		return nil, err
	}
	st.KeyspaceHash, st.FsmAppliedIndex = h, i
	return st, nil
}
