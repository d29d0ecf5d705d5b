package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// LeaderMetadataKey is the header or trailer in which every node names the
// leader's gRPC address, when it knows it (docketv1.MetadataLeader).
const LeaderMetadataKey = docketv1.MetadataLeader

// op describes one RPC for the retry loop.
type op struct {
	name string
	// repeatable is true when sending the request again after
	// ErrOutcomeUnknown cannot apply it twice: the request carries an
	// idempotency key or a fence, or it is a read.
	repeatable bool
	// anyNode is true when any node may answer (stale reads), so an attempt
	// need not wait for a leader to be discovered.
	anyNode bool
}

// rpcFunc sends one attempt of an RPC on cc. It must pass opts on to the
// generated client so that the leader hint can be read.
type rpcFunc func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error

// invoke sends call to the leader and retries it by error class until it
// succeeds, fails for good, or ctx ends. It returns the number of attempts
// made and an error mapped to the package's sentinels.
//
// Retries go in rounds. Within a round every known node is tried at most
// once, at once: when the leader dies its port refuses connections while
// the other nodes can already name (or, once elected, be) the new leader,
// and a backoff sleep before asking them would only add to the outage.
// Only after every node failed the call does the loop sleep a full-jitter
// backoff and start a new round, so a cluster without a leader sees at most
// one attempt per node per backoff from each caller.
func (c *Client) invoke(ctx context.Context, o op, call rpcFunc) (int, error) {
	return c.invokeWait(ctx, o, nil, call)
}

// invokeWait is invoke for a long-poll: before each attempt wait tells, from
// the caller's ctx, how long the server may hold it, and that attempt's
// time budget is the wait plus the attempt timeout.
//
// An attempt that has no answer within its budget, while ctx lives on, is
// abandoned: the node may be paused, cut off or overloaded. It may still
// apply the request, so the attempt ends in ErrOutcomeUnknown, and only a
// repeatable op is retried (on another node first: the round marks it
// tried, and the client forgets it as leader).
func (c *Client) invokeWait(ctx context.Context, o op, wait func(context.Context) time.Duration, call rpcFunc) (int, error) {
	var lastErr error // the last retryable error, reported if ctx ends
	r := newRound()
	sleeps := 0
	for attempt := 1; ; attempt++ {
		addr, cc, err := c.target(ctx, o, r)
		if err == nil {
			var hdr, tr metadata.MD
			actx, cancel, budget := c.attemptCtx(ctx, wait)
			err = mapError(call(actx, cc, grpc.Header(&hdr), grpc.Trailer(&tr)))
			cancel()
			if budget > 0 && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && !deadlinePassed(ctx) {
				// Not the caller's deadline: this attempt's. %v, not %w:
				// the caller's deadline has not passed, and errors.Is must
				// not say it has.
				err = fmt.Errorf("%w: %s gave no answer within %v (attempt timeout): %v", ErrOutcomeUnknown, addr, budget, err)
			}
			hint := leaderHint(hdr, tr)
			if hint == "" {
				hint = errorLeaderHint(err)
			}
			moved := c.followHint(addr, hint, r)
			if err == nil {
				return attempt, nil
			}
			if c.isClosed() {
				return attempt, fmt.Errorf("%s: %w", o.name, ErrClosed)
			}
			// A node that let the caller's whole deadline pass without an
			// answer may be paused or cut off while the others elected a
			// new leader: forget it too, or every later call would wait on
			// it until it came back.
			hung := errors.Is(err, context.DeadlineExceeded) && deadlinePassed(ctx)
			if !moved && (errors.Is(err, ErrNoLeader) || errors.Is(err, ErrOutcomeUnknown) || hung) {
				// The node we called is not a leader we can use: a hint
				// that points elsewhere was followed above; otherwise
				// rediscover on the next attempt.
				c.forgetLeader(addr)
			}
			if !retryable(err, o) {
				return attempt, giveUp(o, attempt, err, lastErr)
			}
			c.log.Debug("retrying", "op", o.name, "attempt", attempt, "addr", addr, "err", err)
			lastErr = err
			r.tried[addr] = true
			if c.untried(r) {
				continue
			}
		} else {
			if errors.Is(err, ErrClosed) || ctx.Err() != nil {
				return attempt, giveUp(o, attempt, err, lastErr)
			}
			lastErr = err
		}
		if serr := sleepCtx(ctx, c.backoff(sleeps)); serr != nil {
			return attempt, giveUp(o, attempt, serr, lastErr)
		}
		sleeps++
		r = newRound()
	}
}

// attemptCtx bounds one attempt: the attempt timeout, plus the long-poll's
// wait when there is one, within ctx. budget is 0 when attempts are not
// bounded (WithAttemptTimeout(0)).
func (c *Client) attemptCtx(ctx context.Context, wait func(context.Context) time.Duration) (context.Context, context.CancelFunc, time.Duration) {
	budget := c.cfg.attemptTimeout
	if wait != nil {
		w := wait(ctx)
		if budget > 0 {
			budget += w
		}
	}
	if budget <= 0 {
		return ctx, func() {}, 0
	}
	actx, cancel := context.WithTimeout(ctx, budget)
	return actx, cancel, budget
}

// round is what one retry round of a call has learned.
type round struct {
	// tried holds the nodes that failed the call in this round. A leader
	// hint or a Status answer that names one of them is a stale view (a
	// follower that has not yet noticed its leader died) and is not
	// followed again in this round.
	tried map[string]bool
	// discovered is set once this round asked every node for Status: if
	// that named no usable leader, asking again before the nodes were
	// tried would only repeat it.
	discovered bool
}

func newRound() *round { return &round{tried: make(map[string]bool)} }

// usable reports whether addr may be sent this round's next attempt as
// the leader: not tried in this round, and not known to be unreachable.
func (c *Client) usable(r *round, addr string) bool {
	return addr != "" && !r.tried[addr] && !c.unreachable(addr)
}

// untried reports whether a known node is left to try in this round: one
// that has not failed yet and that the client can connect to. A node in
// TRANSIENT_FAILURE would fail the attempt without sending it; gRPC keeps
// reconnecting in the background and the node counts again once it is
// back.
func (c *Client) untried(r *round) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.addrs {
		if c.triableLocked(r, a) {
			return true
		}
	}
	return false
}

func (c *Client) triableLocked(r *round, addr string) bool {
	cc := c.conns[addr]
	return !r.tried[addr] && cc != nil && cc.GetState() != connectivity.TransientFailure
}

// retryable reports whether err may be retried for operation o.
// InvalidArgument, NotFound, FailedPrecondition and ResourceExhausted are
// answers, not failures: repeating the request gets the same answer.
func retryable(err error, o op) bool {
	switch {
	case errors.Is(err, ErrOutcomeUnknown):
		return o.repeatable
	case errors.Is(err, ErrNoLeader):
		return true
	}
	return false
}

// giveUp builds the final error. When ctx ended after retries, the error
// wraps both the last server answer (so errors.Is(err, ErrNoLeader) holds)
// and the context error (so errors.Is(err, context.DeadlineExceeded) does).
func giveUp(o op, attempts int, err, lastErr error) error {
	if lastErr != nil && isContextErr(err) {
		return fmt.Errorf("%s: %w (gave up after %d attempts: %w)", o.name, lastErr, attempts, err)
	}
	return fmt.Errorf("%s: %w", o.name, err)
}

// deadlinePassed reports whether ctx's deadline is behind us. It reads the
// clock rather than ctx.Err(): at the deadline the server resets the stream
// and gRPC reports DeadlineExceeded by the same clock, which may be before
// ctx's own timer has fired.
func deadlinePassed(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

func isContextErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// target picks the node for the next attempt: the cached leader, else the
// leader found by discovery (once per round), else the next node not yet
// tried in this round (a follower forwards the call or answers with a
// leader hint).
func (c *Client) target(ctx context.Context, o op, r *round) (string, *grpc.ClientConn, error) {
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return "", nil, ErrClosed
	}
	if c.leader != "" && !r.tried[c.leader] {
		addr, cc := c.leader, c.conns[c.leader]
		c.mu.Unlock()
		return addr, cc, nil
	}
	c.mu.Unlock()
	if !o.anyNode && !r.discovered {
		r.discovered = true
		leader, err := c.discover(ctx, r)
		if leader != "" {
			cc, cerr := c.conn(leader)
			return leader, cc, cerr
		}
		if ctx.Err() != nil {
			return "", nil, ctx.Err()
		}
		if err != nil {
			c.log.Debug("discovery found no node", "op", o.name, "err", err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return "", nil, ErrClosed
	}
	// Round-robin from the shared cursor, so that concurrent callers
	// spread over the nodes; the first node left to try takes the
	// attempt. If none is (every node unreachable at a round's start),
	// any will do: the attempt fails at once and the round ends.
	n := len(c.addrs)
	for i := range n {
		addr := c.addrs[(c.next+i)%n]
		if c.triableLocked(r, addr) {
			c.next += i + 1
			return addr, c.conns[addr], nil
		}
	}
	addr := c.addrs[c.next%n]
	c.next++
	return addr, c.conns[addr], nil
}

// followHint caches the leader a node named. It reports whether the next
// attempt should go to a different node than addr, the one just called. A
// hint naming a node that failed this round, or that the client cannot
// connect to, is ignored: right after a leader dies its followers still
// name it, and following them would only fail again.
func (c *Client) followHint(addr, hint string, r *round) bool {
	if hint == "" || (hint != addr && !c.usable(r, hint)) {
		return false
	}
	c.setLeader(hint)
	return hint != addr
}

// leaderHint reads the leader address from a response's metadata. The
// trailer is preferred: it is written after the request was handled.
func leaderHint(hdr, tr metadata.MD) string {
	for _, md := range []metadata.MD{tr, hdr} {
		if v := md.Get(LeaderMetadataKey); len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	return ""
}

// discover asks every known node for Cluster.Status in parallel and caches
// the first leader named that r allows (nil allows any reachable node). It
// learns the other nodes from the answers. It returns ("", nil) when some
// node answered but none named a usable leader, and an error when no node
// answered at all.
func (c *Client) discover(ctx context.Context, r *round) (string, error) {
	if r == nil {
		r = newRound()
	}
	select {
	case c.discoverSem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-c.discoverSem }()
	// Another caller may have found the leader while this one waited.
	if l := c.Leader(); c.usable(r, l) {
		return l, nil
	}

	type answer struct {
		addr string
		resp *docketv1.StatusResponse
		hint string
		err  error
	}
	addrs := c.Addrs()
	answers := make(chan answer, len(addrs)) // buffered: senders never block after we stop reading
	dctx, cancel := context.WithTimeout(ctx, c.cfg.discoveryTimeout)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, a := range addrs {
		cc, err := c.conn(a)
		if err != nil {
			answers <- answer{addr: a, err: err}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var hdr, tr metadata.MD
			resp, err := docketv1.NewClusterClient(cc).Status(dctx, &docketv1.StatusRequest{}, grpc.Header(&hdr), grpc.Trailer(&tr))
			answers <- answer{addr: a, resp: resp, hint: leaderHint(hdr, tr), err: err}
		}()
	}

	answered := 0
	var errs []error
	for range addrs {
		a := <-answers
		if a.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.addr, mapError(a.err)))
			continue
		}
		answered++
		c.learnStatus(a.resp)
		if l := leaderOf(a.addr, a.resp, a.hint); c.usable(r, l) {
			c.setLeader(l)
			return l, nil
		}
	}
	if answered > 0 {
		return "", nil
	}
	return "", fmt.Errorf("discover: %w", errors.Join(errs...))
}

// leaderOf reads the leader's gRPC address out of one Status answer.
func leaderOf(addr string, resp *docketv1.StatusResponse, hint string) string {
	if l := resp.GetLeaderGrpcAddr(); l != "" {
		return l
	}
	for _, s := range resp.GetServers() {
		if s.GetLeader() && s.GetGrpcAddr() != "" {
			return s.GetGrpcAddr()
		}
	}
	if strings.EqualFold(resp.GetState(), "Leader") {
		if a := resp.GetGrpcAddr(); a != "" {
			return a
		}
		return addr
	}
	return hint
}

// learnStatus records the node addresses a Status answer names.
func (c *Client) learnStatus(resp *docketv1.StatusResponse) {
	c.learnAddr(resp.GetGrpcAddr())
	for _, s := range resp.GetServers() {
		c.learnAddr(s.GetGrpcAddr())
	}
}

// jitter returns a uniform random duration in [0, d].
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}
