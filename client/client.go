package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Defaults for the options below.
const (
	// DefaultRetryBase is the first backoff cap. 50 ms lets a retry land
	// right after a typical Raft election on a LAN without hammering nodes.
	DefaultRetryBase = 50 * time.Millisecond
	// DefaultRetryMax caps the backoff. An election takes 0.3-1.3 s with
	// the default 300 ms Raft timeouts, and a caller asleep in a long
	// backoff when it ends waits past it: with a 2 s cap the client's
	// share of a failover reached 0.6 s once concurrent calls shared a few
	// RPCs (BENCHMARKS.md). 500 ms bounds that share, at two rounds of
	// probing a second per waiting call while there is no leader.
	DefaultRetryMax = 500 * time.Millisecond
	// DefaultDiscoveryTimeout bounds one Status call during discovery, so
	// that one black-holed node cannot eat a caller's whole deadline.
	DefaultDiscoveryTimeout = 2 * time.Second

	// DefaultAttemptTimeout bounds one attempt of a call (a long-poll's
	// attempt gets its wait on top). Without it a leader frozen by
	// SIGSTOP, or cut off without a reset, held every call until the
	// caller's deadline (5 s in the failure report), although the others
	// elected a new leader in about 0.6 s. With it a frozen leader costs
	// a call about max(election, 2 s) plus one attempt elsewhere. Why 2 s:
	// it is about 10 times the worst p99 measured on the shared 2-core box
	// (claim p99 207 ms, enqueue batch-100 p99 112 ms; BENCHMARKS.md), so a
	// busy but healthy leader is not abandoned, and it is below both an
	// election plus a retry round and the default 5 s caller deadlines of
	// the CLI. An abandoned attempt's outcome is unknown
	// (ErrOutcomeUnknown): repeatable calls retry it (idempotency keys,
	// fences), the others return it. Each abandoned write that is retried
	// is sent twice, so on a cluster that is slow rather than frozen a
	// shorter timeout adds load when there is least room for it.
	DefaultAttemptTimeout = 2 * time.Second

	// DefaultKeepaliveTime is how long a connection may be silent before
	// the client pings the node, and DefaultKeepaliveTimeout how long it
	// then waits for the ack before it closes the connection. The attempt
	// timeout bounds unary calls; keepalive is what notices a frozen node
	// under a long-poll (up to 30 s of silence) and on an idle connection,
	// which then turns TRANSIENT_FAILURE and is skipped by retry rounds
	// instead of costing an attempt. 10 s is the least gRPC-Go allows (it
	// raises smaller values); 5 s without a ping ack means the process
	// is not running: acks are sent by the HTTP/2 reader, not by
	// handlers, so a loaded server still answers them. A long-poll on a
	// frozen leader thus ends within about 15 s instead of its wait plus
	// the attempt timeout. The server must permit pings this often
	// without streams (transport sets MinTime 5 s, PermitWithoutStream);
	// a server that does not answers GOAWAY "too_many_pings" and gRPC
	// doubles the interval.
	DefaultKeepaliveTime    = 10 * time.Second
	DefaultKeepaliveTimeout = 5 * time.Second
)

// MaxReceiveBytes is the client's receive limit: the largest answer a
// Docket server can send (transport.MaxAnswerBytes, where the arithmetic
// is written down), so that no answer the server produced is refused here.
// A claim refused on receipt would leave its tasks RUNNING under a lease
// nobody holds, and burn an attempt when the lease is reaped.
const MaxReceiveBytes = 49 << 20

// reconnect is how a connection to a node that went away is retried.
// gRPC's default waits 1 s and grows to 120 s, and while it waits every
// call on that connection fails at once: a node that was down for a few
// minutes and then won an election could stay out of this client's reach
// for up to two more. Capping the wait at 1 s costs one refused connect
// per second per dead node. MinConnectTimeout is gRPC's default, spelled
// out because left zero here the connect deadline would shrink to the
// backoff (100 ms), too short for a slow handshake.
var reconnect = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  100 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   time.Second,
	},
	MinConnectTimeout: 20 * time.Second,
}

// Option configures a Client.
type Option func(*config)

type config struct {
	log              *slog.Logger
	dialOpts         []grpc.DialOption
	retryBase        time.Duration
	retryMax         time.Duration
	discoveryTimeout time.Duration
	attemptTimeout   time.Duration
	keepalive        keepalive.ClientParameters
	share            [numRPCKinds]int // RPCs in flight before calls share, by kind; 0: never
	token            string
	tenant           string
	addrs            []string // from WithEnv, after New's own
	err              error    // an option that failed (WithTLS), returned by New
}

// WithLogger sets the logger. The default is slog.Default(). Retries and
// leader changes log at Debug, so a command-line tool stays quiet; a
// Worker's lost leases and failed reports log at Warn and Error.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

// WithDialOptions adds gRPC dial options, applied after the default
// insecure transport credentials, so a caller's credentials win.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOpts = append(c.dialOpts, opts...) }
}

// WithToken sends secret as a bearer token ("authorization: Bearer
// <secret>") with every call, discovery included: the per-RPC credentials
// a cluster with auth on asks for. It is allowed over the insecure
// transport in this round, so the secret crosses the network in clear
// text until the client speaks TLS: use it on loopback or a trusted
// network only.
func WithToken(secret string) Option {
	return func(c *config) { c.token = secret }
}

// WithRequestTenant names the tenant that ReadTask, WaitResult and CancelTask
// send with a task id. A server with auth on answers NotFound for a task
// of another tenant, and takes an empty tenant as the default one; with
// auth off an empty tenant checks nothing.
func WithRequestTenant(tenant string) Option {
	return func(c *config) { c.tenant = tenant }
}

// WithRetryBackoff sets the full-jitter exponential backoff between retries:
// attempt n sleeps a uniform random time in [0, min(max, base*2^n)].
func WithRetryBackoff(base, max time.Duration) Option {
	return func(c *config) {
		if base > 0 {
			c.retryBase = base
		}
		if max > 0 {
			c.retryMax = max
		}
	}
}

// WithDiscoveryTimeout bounds each Cluster.Status call made to find the
// leader. The default is DefaultDiscoveryTimeout.
func WithDiscoveryTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.discoveryTimeout = d
		}
	}
}

// WithAttemptTimeout bounds each attempt of a call to one node; a
// long-poll's attempt (Claim, WaitResult) gets its wait on top. An attempt
// without an answer in time ends in ErrOutcomeUnknown: calls that are safe
// to repeat go on to another node, the others (Nack, RequeueDead,
// TransferLeadership) return it. 0 turns the bound off, so an attempt runs
// until the caller's ctx ends. Default DefaultAttemptTimeout.
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *config) { c.attemptTimeout = max(d, 0) }
}

// WithKeepalive sets the gRPC keepalive of every connection: after
// interval without a frame from the node the client pings it, and closes
// the connection if no ack comes within timeout (gRPC raises an interval
// under 10 s to 10 s). Pings are sent on idle connections too. An interval
// of 0 turns keepalive off. Defaults DefaultKeepaliveTime and
// DefaultKeepaliveTimeout. A keepalive set through WithDialOptions wins.
func WithKeepalive(interval, timeout time.Duration) Option {
	return func(c *config) {
		c.keepalive = keepalive.ClientParameters{Time: max(interval, 0), Timeout: max(timeout, 0), PermitWithoutStream: true}
	}
}

// Client talks to a Docket cluster. It finds the leader, sends every call
// to it, follows it when it moves, and retries by error class. It is safe
// for concurrent use; make one per process and Close it when done.
type Client struct {
	cfg config
	log *slog.Logger

	// discoverSem serialises discovery so that many callers who lose the
	// leader at once send one round of Status calls, not one each.
	discoverSem chan struct{}

	// enq, sub, clm and hb share Enqueue, Submit, Claim and Heartbeat
	// RPCs between concurrent callers; nil when sharing is off.
	enq *sharer[*docketv1.NewTask, *docketv1.ItemResult]
	sub *sharer[submitItem, submitResult]
	clm *sharer[*docketv1.ClaimRequest, []*docketv1.Task]
	hb  *sharer[*docketv1.HeartbeatItem, *docketv1.ItemResult]
	// claiming counts the Claim calls under way while sharing is on, so
	// that a lone long poll can skip the shared try (claimShared).
	claiming atomic.Int32

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn // by gRPC address, created lazily, closed only by Close
	addrs  []string                    // known node addresses: seeds first, then learned
	leader string                      // cached leader address; "" when unknown
	next   int                         // round-robin cursor used while no leader is known
	closed bool
}

// New returns a Client for the cluster that the given gRPC addresses
// belong to, configured by opts (the With* functions of type Option).
// One address is enough: the others are learned from Cluster.Status.
// WithEnv adds the addresses, TLS files and token of the docket CLI's
// environment. New returns once a node has answered Status (it need not
// know a leader yet), retrying with backoff until ctx ends; give ctx a
// deadline to fail fast on a wrong address.
func New(ctx context.Context, addrs []string, opts ...Option) (*Client, error) {
	cfg := config{
		log:              slog.Default(),
		retryBase:        DefaultRetryBase,
		retryMax:         DefaultRetryMax,
		discoveryTimeout: DefaultDiscoveryTimeout,
		attemptTimeout:   DefaultAttemptTimeout,
		keepalive: keepalive.ClientParameters{
			Time: DefaultKeepaliveTime, Timeout: DefaultKeepaliveTimeout, PermitWithoutStream: true,
		},
		share: defaultShare(),
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err != nil {
		return nil, fmt.Errorf("new client: %w", cfg.err)
	}
	if cfg.retryMax < cfg.retryBase {
		cfg.retryMax = cfg.retryBase
	}
	c := &Client{
		cfg:         cfg,
		log:         cfg.log.With("component", "docket-client"),
		discoverSem: make(chan struct{}, 1),
		conns:       make(map[string]*grpc.ClientConn),
	}
	for _, a := range slices.Concat(addrs, cfg.addrs) {
		a = strings.TrimSpace(a)
		if a == "" || slices.Contains(c.addrs, a) {
			continue
		}
		if _, err := c.conn(a); err != nil {
			return nil, errors.Join(fmt.Errorf("new client: %w", err), c.Close())
		}
	}
	if len(c.addrs) == 0 {
		return nil, fmt.Errorf("new client: %w: no address given", ErrInvalidArgument)
	}
	var lastErr error
	for attempt := 0; ; attempt++ {
		_, err := c.discover(ctx, nil)
		if err == nil {
			if n := cfg.share[EnqueueRPCs]; n > 0 {
				c.enq = newSharer("Enqueue", n, enqueueBurst, sizeOf[*docketv1.NewTask], nil, c.enqueueRPC, c.enqueueRPC)
			}
			if n := cfg.share[SubmitRPCs]; n > 0 {
				c.sub = newSharer("Submit", n, 0, submitItemSize, nil, c.submitAlone, c.submitBatchRPC)
			}
			if n := cfg.share[ClaimRPCs]; n > 0 {
				c.clm = newSharer("Claim", n, 0, sizeOf[*docketv1.ClaimRequest], claimWeight, c.claimAlone, c.claimBatchRPC)
			}
			if n := cfg.share[HeartbeatRPCs]; n > 0 {
				c.hb = newSharer("Heartbeat", n, 0, sizeOf[*docketv1.HeartbeatItem], nil, c.heartbeatRPC, c.heartbeatRPC)
			}
			return c, nil
		}
		// A failure that says why (refused, unreachable) beats the
		// deadline that cut the last round short.
		if lastErr == nil || !isContextErr(err) {
			lastErr = err
		}
		if sleepCtx(ctx, c.backoff(attempt)) != nil {
			return nil, errors.Join(newClientError(c.Addrs(), lastErr, ctx.Err()), c.Close())
		}
	}
}

// NewWithOptions is New, under the name it had when New took no options.
//
// Deprecated: use New.
func NewWithOptions(ctx context.Context, addrs []string, opts ...Option) (*Client, error) {
	return New(ctx, addrs, opts...)
}

// newClientError explains why New gave up: it always wraps ErrNoLeader,
// since no node answered, and the context error when there is one.
func newClientError(addrs []string, cause, ctxErr error) error {
	if !errors.Is(cause, ErrNoLeader) {
		cause = fmt.Errorf("%w: %w", ErrNoLeader, cause)
	}
	if ctxErr != nil && !errors.Is(cause, ctxErr) {
		cause = fmt.Errorf("%w (%w)", cause, ctxErr)
	}
	return fmt.Errorf("new client: no node of %v answered: %w", addrs, cause)
}

// Close closes every connection. Calls in flight fail with ErrClosed.
func (c *Client) Close() error {
	err := c.closeConns()
	// After the connections: the shared RPCs then end at once.
	if c.enq != nil {
		c.enq.close()
	}
	if c.sub != nil {
		c.sub.close()
	}
	if c.clm != nil {
		c.clm.close()
	}
	if c.hb != nil {
		c.hb.close()
	}
	return err
}

func (c *Client) closeConns() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for a, cc := range c.conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", a, err))
		}
	}
	return errors.Join(errs...)
}

// Leader returns the gRPC address of the cached leader, or "" when the
// client does not know one right now.
func (c *Client) Leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// Addrs returns the node addresses the client knows: the ones it was given
// and the ones it learned from Cluster.Status.
func (c *Client) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.addrs)
}

// conn returns the connection to addr, creating it on first use.
// grpc.NewClient does no I/O: the connection is made by the first call.
func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connLocked(addr)
}

func (c *Client) connLocked(addr string) (*grpc.ClientConn, error) {
	if c.closed {
		return nil, ErrClosed
	}
	if cc, ok := c.conns[addr]; ok {
		return cc, nil
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// One connection per node carries every caller of this Client:
		// fixed 1 MiB stream and 8 MiB connection windows (gRPC starts at
		// 64 KiB) so batched calls do not wait on HTTP/2 flow control.
		grpc.WithInitialWindowSize(1 << 20),
		grpc.WithInitialConnWindowSize(8 << 20),
		grpc.WithConnectParams(reconnect),
		// gRPC's default 4 MiB receive limit refused a Claim of a few
		// 1 MB tasks after the server had claimed them.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxReceiveBytes)),
	}
	if c.cfg.keepalive.Time > 0 {
		opts = append(opts, grpc.WithKeepaliveParams(c.cfg.keepalive))
	}
	if c.cfg.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken(c.cfg.token)))
	}
	opts = append(opts, c.cfg.dialOpts...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c.conns[addr] = cc
	if !slices.Contains(c.addrs, addr) {
		c.addrs = append(c.addrs, addr)
	}
	return cc, nil
}

// unreachable reports whether the client's last attempt to connect to
// addr failed and none has succeeded since. Calls on such a connection fail
// at once (they are not WaitForReady), so it is no use as a leader.
func (c *Client) unreachable(addr string) bool {
	c.mu.Lock()
	cc := c.conns[addr]
	c.mu.Unlock()
	return cc != nil && cc.GetState() == connectivity.TransientFailure
}

// learnAddr records a node address (from Status.servers or a leader hint).
// A bad address is logged, not fatal: the other nodes still work.
func (c *Client) learnAddr(addr string) {
	if addr == "" {
		return
	}
	if _, err := c.conn(addr); err != nil && !errors.Is(err, ErrClosed) {
		c.log.Warn("ignoring node address", "addr", addr, "err", err)
	}
}

// setLeader caches addr as the leader; it reports whether that changed.
func (c *Client) setLeader(addr string) bool {
	if addr == "" {
		return false
	}
	c.mu.Lock()
	if _, err := c.connLocked(addr); err != nil {
		c.mu.Unlock()
		return false
	}
	old := c.leader
	c.leader = addr
	c.mu.Unlock()
	if old != addr {
		c.log.Debug("following leader", "leader", addr, "previous", old)
		return true
	}
	return false
}

// forgetLeader drops the cached leader if it is still addr, so that the
// next attempt rediscovers. Comparing first keeps a concurrent caller's
// fresher answer.
func (c *Client) forgetLeader(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader == addr {
		c.leader = ""
	}
}

// backoff is full jitter: uniform in [0, min(max, base*2^attempt)], which
// spreads the retries of many clients that lost the same leader.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.cfg.retryBase
	for i := 0; i < attempt && d < c.cfg.retryMax; i++ {
		d *= 2
	}
	return jitter(min(d, c.cfg.retryMax))
}

// sleepCtx sleeps for d or until ctx ends, whichever is first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
