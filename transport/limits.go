package transport

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
)

// ErrOverloaded means a bound on what callers may hold at once on this node
// was reached (Config.MaxLongPolls, MaxLongPollsPerConn). Nothing was done:
// the caller may retry after a backoff, on this node or another. It maps to
// Unavailable with reason OVERLOADED.
var ErrOverloaded = errors.New("overloaded")

// serverLimits are the gRPC options that bound what one client connection
// may hold: streams, ping rate, idle time and age (Config documents each).
func (c Config) serverLimits() []grpc.ServerOption {
	age := c.MaxConnectionAge
	if age <= 0 {
		age = math.MaxInt64 // gRPC's "infinity"
	}
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(c.MaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             c.KeepaliveMinTime,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     c.MaxConnectionIdle,
			MaxConnectionAge:      age,
			MaxConnectionAgeGrace: c.MaxConnectionAgeGrace,
			Time:                  c.KeepaliveTime,
			Timeout:               c.KeepaliveTimeout,
		}),
		grpc.ConnectionTimeout(c.HandshakeTimeout),
	}
}

// pollLimiter counts the long polls waiting on this node, in total and per
// client connection. A connection is known by its peer address, which is
// unique among open TCP connections; counting on entry costs one lock,
// where a stats handler would run on every call.
type pollLimiter struct {
	maxTotal, maxPerConn int

	mu      sync.Mutex
	total   int
	perConn map[string]int
}

func newPollLimiter(maxTotal, maxPerConn int) *pollLimiter {
	return &pollLimiter{maxTotal: maxTotal, maxPerConn: maxPerConn, perConn: map[string]int{}}
}

// acquire takes a long-poll slot for the call of ctx, or answers
// ErrOverloaded. release gives it back; call it once.
func (p *pollLimiter) acquire(ctx context.Context) (release func(), err error) {
	key, perConn := "", !isForwarded(ctx)
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		key = pr.Addr.String()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.total >= p.maxTotal {
		return nil, fmt.Errorf("%w: %d long polls wait on this node (limit %d)", ErrOverloaded, p.total, p.maxTotal)
	}
	if perConn {
		if n := p.perConn[key]; n >= p.maxPerConn {
			return nil, fmt.Errorf("%w: %d long polls wait on this connection (limit %d)", ErrOverloaded, n, p.maxPerConn)
		}
		p.perConn[key]++
	}
	p.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.total--
			if perConn {
				if p.perConn[key]--; p.perConn[key] <= 0 {
					delete(p.perConn, key)
				}
			}
		})
	}, nil
}
