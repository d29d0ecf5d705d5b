package service

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Defaults of ServiceConfig fields left zero.
const (
	DefaultCoalesceMax       = 512
	DefaultCoalesceInflight  = 4
	DefaultHeartbeatInflight = 1
)

// ServiceConfig tunes a node's Service. The zero value is usable.
type ServiceConfig struct {
	// Logger receives the service's messages; nil discards them.
	Logger *slog.Logger

	// DefaultLease is the lease of a Claim that gives no lease_ns.
	// Default pb.DefaultLease (30 s).
	DefaultLease time.Duration

	// CoalesceMax bounds the client commands (Enqueue, Claim, Heartbeat,
	// Submit, Nack, Cancel) the leader folds into one Batch entry.
	// Default 512: one entry then carries every caller of a busy node's
	// round trip, and a Batch stays far below fsm.MaxBatchCommands. 1
	// turns coalescing off: each command is an entry of its own.
	CoalesceMax int

	// CoalesceInflight is how many entries of client commands the leader
	// keeps in flight before it starts to coalesce: below it a command is
	// proposed at once, alone. Default 4. Fewer slots make larger
	// batches (less Raft and FSM work per command) at the cost of waiting
	// for a slot; more slots lean on Raft's own batching of appends.
	CoalesceInflight int

	// HeartbeatInflight is CoalesceInflight for heartbeats, which have a
	// lane of their own. Default 1: a heartbeat is due within seconds,
	// not milliseconds, so while one entry of them is in flight the rest
	// wait and go together, merged into one command (groupcommit.go).
	HeartbeatInflight int

	// Registerer, when set, receives the service's Prometheus metrics
	// (docket_cluster_*). nil keeps them unregistered.
	Registerer prometheus.Registerer

	// MemoryLimit bounds the process's memory in bytes (memory.go): from
	// MemoryRefuseFraction (90 %) of it, sampled every
	// MemorySampleInterval, the node refuses Enqueue with ErrMemoryLimit,
	// while Claim, Heartbeat, Submit, Nack and every other command, which
	// free memory or hold it steady, still run. Default 0: no limit. The
	// agent also sets the Go runtime's soft limit (debug.SetMemoryLimit) to
	// the refuse mark, so garbage is collected before it is refused for.
	MemoryLimit uint64
}

func (c ServiceConfig) withDefaults() ServiceConfig {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.DefaultLease <= 0 {
		c.DefaultLease = pb.DefaultLease
	}
	if c.CoalesceMax <= 0 || c.CoalesceMax > fsm.MaxBatchCommands {
		c.CoalesceMax = min(DefaultCoalesceMax, fsm.MaxBatchCommands)
	}
	if c.CoalesceInflight <= 0 {
		c.CoalesceInflight = DefaultCoalesceInflight
	}
	if c.HeartbeatInflight <= 0 {
		c.HeartbeatInflight = DefaultHeartbeatInflight
	}
	return c
}

// Service is a cluster member's write and read paths, the part of it the
// API layer calls: request checks, group commit, long-poll Claims and
// WaitResults over the FSM's events, and reads at a chosen consistency.
// A cluster.Node has one, embedded; so has a MemNode.
//
// It owns the FSM's observer slot, the coalescer goroutines, the memory
// sampler (with a MemoryLimit) and the goroutines that propose on behalf
// of callers who left; Close ends them.
type Service struct {
	r       replica.Replica
	cfg     ServiceConfig
	log     *slog.Logger
	metrics *serviceMetrics

	co   *coalescer // client commands
	hb   *coalescer // heartbeats: their own lane (groupcommit.go)
	hub  *hub
	gate *claimGate
	// orphans are claims whose answer this node saw go undelivered.
	orphans *orphanSet
	// mem refuses new work at the memory limit; nil without one.
	mem *memGuard

	// drain is closed by Drain: long polls return at once and new ones
	// do not wait, so a stopping server does not wait out their timers.
	drain     chan struct{}
	drainOnce sync.Once

	ctx    context.Context // ends with close; bounds proposals for callers who left
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // orders spawn's wg.Add before close's wg.Wait
	closed bool

	closeOnce sync.Once
	checks    atomic.Uint64 // requests checked (Checks)
}

func New(r replica.Replica, cfg ServiceConfig) *Service {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{
		r:       r,
		cfg:     cfg,
		log:     cfg.Logger.With("component", "service"),
		metrics: newServiceMetrics(cfg.Registerer, cfg.Logger),
		gate:    newClaimGate(),
		orphans: newOrphanSet(),
		drain:   make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
	}
	s.hub = newHub(s.gate)
	s.co, s.hb = newCoalescer(s, cfg.CoalesceInflight), newCoalescer(s, cfg.HeartbeatInflight)
	s.mem = newMemGuard(cfg.MemoryLimit, cfg.Registerer, s.log)
	r.FSM().SetObserver(s.hub.observe)
	s.wg.Add(2)
	go s.co.run()
	go s.hb.run()
	if s.mem != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.mem.run(s.ctx)
		}()
	}
	return s
}

// Drain ends every long poll at once with an empty answer, and makes later
// ones answer without waiting. A server calls it as it begins to stop.
func (s *Service) Drain() { s.drainOnce.Do(func() { close(s.drain) }) }

func (s *Service) draining() bool {
	select {
	case <-s.drain:
		return true
	default:
		return false
	}
}

// Close drains, stops the coalescer and waits for every proposal the
// service started. Callers still waiting get replica.ErrShutdown.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		s.Drain()
		s.r.FSM().SetObserver(nil)
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		s.wg.Wait()
	})
}

// spawn runs fn on a goroutine that close waits for, unless the service
// is closing; it reports whether fn was started.
func (s *Service) spawn(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return true
}

// Waiting reports how many queues and tasks have long polls waiting on this
// node, and how many long polls wait.
func (s *Service) Waiting() (queues, tasks, waiters int) {
	q, t := s.hub.waiting()
	return q, t, s.hub.sleepers()
}

// QueuedCommands is how many client commands wait for a proposal slot
// (ServiceConfig.CoalesceInflight) to share the next Batch entry.
func (s *Service) QueuedCommands() int { return s.co.lane.Queued() + s.hb.lane.Queued() }

// IsLeader reports whether the node under the Service leads.
func (s *Service) IsLeader() bool { return s.r.IsLeader() }

// LeaderGRPCAddr is the leader's advertised gRPC address, "" when no
// leader is known; on the leader it is its own.
func (s *Service) LeaderGRPCAddr() string { return s.r.LeaderGRPCAddr() }

// Checks counts the requests this Service checked (Check): a request is
// checked once, on the node that received it.
func (s *Service) Checks() uint64 { return s.checks.Load() }
