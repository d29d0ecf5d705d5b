package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/internal/lane"
)

// DefaultShareInflight is how many RPCs of each kind a Client keeps in
// flight before concurrent calls of that kind start to share RPCs, for
// every kind but Enqueue (DefaultShareInflightEnqueue): Submit, Claim and
// Heartbeat. Two, because fewer, larger requests won at every concurrency
// measured: 256 callers made 26.1k enqueues/s with 2 against 23.1k/s with
// 8, and a drain of claims and submits ran 4 % slower with 1 than with 2
// (BENCHMARKS.md). A caller alone, or with one other, still waits for
// nobody.
const DefaultShareInflight = 2

// DefaultShareInflightEnqueue is DefaultShareInflight for Enqueue RPCs.
// One: each Enqueue RPC becomes one Raft entry, and a node appends and
// fsyncs the entries that wait together, so one RPC in flight makes each
// fsync round carry the tasks of every caller that arrived meanwhile. A
// lone caller still waits for nobody; a second waits for the first's
// answer. While a full Enqueue (enqueueBurst) waits, one more goes: it
// can carry nothing more by waiting, and 1 MiB payloads, four to an RPC,
// ran 9 % slower without it (BENCHMARKS.md, "one Enqueue RPC in flight").
const DefaultShareInflightEnqueue = 1

// enqueueBurst is how many Enqueue RPCs beyond the limit may go while a
// full one waits (lane.WithBurst).
const enqueueBurst = 1

// RPCKind names a kind of RPC whose concurrent calls a Client shares
// (WithSharedRPCsOf).
type RPCKind int

// The kinds of RPC a Client shares.
const (
	EnqueueRPCs   RPCKind = iota // Enqueue: concurrent Enqueue calls
	SubmitRPCs                   // SubmitBatch: concurrent Submit, Complete and Fail calls
	ClaimRPCs                    // ClaimBatch: concurrent Claims (a long poll's first try)
	HeartbeatRPCs                // Heartbeat: concurrent Heartbeat calls
	numRPCKinds
)

func (k RPCKind) String() string {
	switch k {
	case EnqueueRPCs:
		return "Enqueue"
	case SubmitRPCs:
		return "Submit"
	case ClaimRPCs:
		return "Claim"
	case HeartbeatRPCs:
		return "Heartbeat"
	}
	return fmt.Sprintf("RPCKind(%d)", int(k))
}

// RPCKinds are the kinds of RPC a Client shares, in order.
func RPCKinds() []RPCKind { return []RPCKind{EnqueueRPCs, SubmitRPCs, ClaimRPCs, HeartbeatRPCs} }

// DefaultSharedRPCs is how many RPCs of kind a Client keeps in flight
// before that kind's calls share, without WithSharedRPCs or
// WithSharedRPCsOf: DefaultShareInflightEnqueue for Enqueue,
// DefaultShareInflight for the others.
func DefaultSharedRPCs(kind RPCKind) int {
	if kind == EnqueueRPCs {
		return DefaultShareInflightEnqueue
	}
	return DefaultShareInflight
}

// defaultShare is each kind's RPCs in flight before its calls share.
func defaultShare() [numRPCKinds]int {
	var s [numRPCKinds]int
	for k := range s {
		s[k] = DefaultSharedRPCs(RPCKind(k))
	}
	return s
}

// Bounds of one shared RPC: the server's items-per-call limit
// (pb.MaxBatch; for ClaimBatch, the sum of max_tasks) and half its
// default 8 MiB request limit.
const (
	maxSharedItems = 1000
	maxSharedBytes = 4 << 20
)

// retrySharedAfter is how long a sharer sends calls alone after the server
// answered its shared RPC Unimplemented: long enough that an older server
// costs nearly no extra RPCs, short enough that sharing comes back soon
// after a rolling upgrade reaches the leader.
const retrySharedAfter = time.Minute

// WithSharedRPCs sets how many RPCs of each kind the client keeps in
// flight before concurrent calls of that kind share one RPC; 0 turns
// sharing off. Enqueue, Submit, Claim and Heartbeat each have their own
// limit of this size (WithSharedRPCsOf sets one kind's). Default
// DefaultShareInflightEnqueue for Enqueue, DefaultShareInflight for the
// others.
//
// Below the limit every call is sent at once on its own, so a lone caller
// waits for nothing. While the limit is reached, calls queue, and the next
// free slot sends all of them as one request (up to 1,000 items, or for
// claims 1,000 max_tasks, and 4 MiB): group commit, the way Kafka
// producers batch but without a linger. Concurrent Enqueues share an
// Enqueue RPC; concurrent Submits a SubmitBatch RPC; concurrent Claims a
// ClaimBatch RPC (claimshare.go: a long-poll shares only its first,
// wait-free try); concurrent Heartbeats a Heartbeat RPC. Each caller
// still gets exactly its own results, and each claimer its own tasks
// under its own worker id and lease. If the server refuses a shared
// request as invalid, too large or not permitted, or does not know the
// RPC (a server older than ClaimBatch), each caller's items are sent
// again on their own, so one caller's bad item fails that caller only;
// idempotency keys and fences make this safe, and a claim is repeatable.
func WithSharedRPCs(inflight int) Option {
	return func(c *config) {
		for k := range c.share {
			c.share[k] = inflight
		}
	}
}

// WithSharedRPCsOf is WithSharedRPCs for one kind of RPC; options apply
// in order, so WithSharedRPCs(4) then WithSharedRPCsOf(EnqueueRPCs, 1)
// leaves Enqueue at 1 and the others at 4.
func WithSharedRPCsOf(kind RPCKind, inflight int) Option {
	return func(c *config) {
		if kind < 0 || kind >= numRPCKinds {
			c.err = fmt.Errorf("shared RPCs: %w: unknown kind %v", ErrInvalidArgument, kind)
			return
		}
		c.share[kind] = inflight
	}
}

// sharer lets concurrent calls of one kind share RPCs. Each call carries
// items of type T and gets one R per item.
type sharer[T, R any] struct {
	op   string
	size func(T) int
	// weight is what an item counts against maxSharedItems; nil: 1.
	weight func(T) int
	alone  func(context.Context, []T) ([]R, error) // one caller's RPC
	shared func(context.Context, []T) ([]R, error) // many callers' RPC
	lane   *lane.Lane[*shareCall[T, R]]
	ctx    context.Context // ends when the Client closes
	stop   context.CancelFunc
	// sharedOffUntil (ns since born, a monotonic reading) is when to try
	// the shared RPC again after the server answered it Unimplemented;
	// until then calls go alone. An older follower that answers before
	// redirecting to the leader pauses sharing the same way.
	born           time.Time
	sharedOffUntil atomic.Int64
	retryShared    time.Duration // retrySharedAfter; tests shorten it
	wg             sync.WaitGroup
}

type shareCall[T, R any] struct {
	ctx    context.Context
	items  []T
	size   int
	weight int
	reply  chan shareReply[R] // buffered: a send never blocks on a caller
	// alone is set when the call is sent on its own, with the caller's
	// context: its answer then comes as soon as that context ends, and
	// the caller takes it, so that it sees exactly what an unshared call
	// would (and the client has forgotten a leader that let it time out).
	alone atomic.Bool
}

type shareReply[R any] struct {
	out []R
	err error
}

// newSharer starts a sharer that keeps inflight RPCs in flight, and burst
// more while a full one (at maxSharedItems or maxSharedBytes) waits.
func newSharer[T, R any](op string, inflight, burst int, size, weight func(T) int,
	alone, shared func(context.Context, []T) ([]R, error)) *sharer[T, R] {
	ctx, stop := context.WithCancel(context.Background())
	s := &sharer[T, R]{op: op, size: size, weight: weight, alone: alone, shared: shared, born: time.Now(), retryShared: retrySharedAfter,
		ctx: ctx, stop: stop}
	measure := func(c *shareCall[T, R]) (int, int) { return c.weight, c.size }
	s.lane = lane.New(4096, inflight, lane.Bounds{Weight: maxSharedItems, Bytes: maxSharedBytes}, measure, s.flush).WithBurst(burst)
	s.wg.Add(1)
	go s.run()
	return s
}

// close stops the loop and waits for the RPCs in flight.
func (s *sharer[T, R]) close() {
	s.stop()
	s.wg.Wait()
}

// do sends items, alone or sharing an RPC, and returns their results.
func (s *sharer[T, R]) do(ctx context.Context, items []T) ([]R, error) {
	size, weight := 0, len(items)
	for _, it := range items {
		size += s.size(it)
	}
	if s.weight != nil {
		weight = 0
		for _, it := range items {
			weight += s.weight(it)
		}
	}
	if done := s.lane.TryAlone(); done != nil {
		// Nothing queued and a slot free: send alone from this goroutine,
		// as send would, without the hand-offs to the lane and back.
		defer done()
		if s.ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", s.op, ErrClosed)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", s.op, err)
		}
		return s.alone(ctx, items)
	}
	call := &shareCall[T, R]{ctx: ctx, items: items, size: size, weight: weight, reply: make(chan shareReply[R], 1)}
	select {
	case s.lane.Calls() <- call:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", s.op, ctx.Err())
	case <-s.ctx.Done():
		return nil, fmt.Errorf("%s: %w", s.op, ErrClosed)
	}
	select {
	case r := <-call.reply:
		return r.out, r.err
	case <-ctx.Done():
		if call.alone.Load() {
			r := <-call.reply
			return r.out, r.err
		}
		// The shared RPC may still apply these items.
		return nil, fmt.Errorf("%s: %w: %w", s.op, ErrOutcomeUnknown, ctx.Err())
	}
}

// run shares RPCs until the Client closes, then answers the calls left
// with ErrClosed.
func (s *sharer[T, R]) run() {
	defer s.wg.Done()
	for _, call := range append(s.lane.Run(s.ctx), s.lane.Drain()...) {
		call.reply <- shareReply[R]{err: fmt.Errorf("%s: %w", s.op, ErrClosed)}
	}
}

// flush starts the RPC of one batch; its lane slot is free again (done)
// once the answers are out.
func (s *sharer[T, R]) flush(batch []*shareCall[T, R], done func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer done()
		s.send(batch)
	}()
}

// send makes one RPC for the live calls of batch and hands each caller its
// results.
func (s *sharer[T, R]) send(batch []*shareCall[T, R]) {
	live := batch[:0]
	var until lane.Latest
	var items []T
	for _, call := range batch {
		if call.ctx.Err() != nil {
			continue // the caller has gone with an error: send nothing
		}
		live = append(live, call)
		items = append(items, call.items...)
		until.Add(call.ctx)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		live[0].alone.Store(true)
		out, err := s.alone(live[0].ctx, live[0].items)
		live[0].reply <- shareReply[R]{out, err}
		return
	}
	// The request serves every caller: it may run until the last of their
	// deadlines, and ends early only when the Client closes.
	if time.Since(s.born) < time.Duration(s.sharedOffUntil.Load()) {
		s.eachAlone(live)
		return
	}
	ctx, cancel := until.Context(s.ctx)
	defer cancel()
	out, err := s.shared(ctx, items)
	if status.Code(err) == codes.Unimplemented {
		// The server predates SubmitBatch or ClaimBatch. Asking it again on
		// every batch would cost each batch an extra RPC; asking again
		// after a while finds the new server once a rolling upgrade ends.
		s.sharedOffUntil.Store(int64(time.Since(s.born) + s.retryShared))
	}
	if errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrPermissionDenied) ||
		errors.Is(err, ErrFeatureDisabled) || status.Code(err) == codes.Unimplemented {
		// Nothing was applied: let each caller's own items answer. A
		// token may cover one caller's tenant and not another's, and
		// during a rolling upgrade one caller's item may need a feature
		// the cluster has not enabled while the others' do not.
		s.eachAlone(live)
		return
	}
	if err == nil && len(out) != len(items) {
		err = fmt.Errorf("%s: server answered %d results for %d items", s.op, len(out), len(items))
	}
	off := 0
	for _, call := range live {
		r := shareReply[R]{err: err}
		if err == nil {
			r.out = out[off : off+len(call.items)]
		}
		off += len(call.items)
		call.reply <- r
	}
}

// eachAlone sends every call on its own RPC, at once, and hands each its
// answer.
func (s *sharer[T, R]) eachAlone(live []*shareCall[T, R]) {
	var wg sync.WaitGroup
	for _, call := range live {
		// As for a lone call: the RPC runs on the caller's context, and
		// the caller takes its answer even when that context ends.
		call.alone.Store(true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := s.alone(call.ctx, call.items)
			call.reply <- shareReply[R]{out, err}
		}()
	}
	wg.Wait()
}

// sizeOf is the encoded size of one item, for the 4 MiB bound.
func sizeOf[T proto.Message](m T) int { return proto.Size(m) }
