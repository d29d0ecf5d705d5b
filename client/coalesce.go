package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// DefaultEnqueueInflight is how many Enqueue RPCs a Client keeps in flight
// before concurrent Enqueue calls start to share RPCs.
const DefaultEnqueueInflight = 8

// Bounds of one shared Enqueue RPC: the server's tasks-per-command limit
// (fsm.MaxBatch) and half its default 8 MiB request limit.
const (
	maxSharedTasks = 1000
	maxSharedBytes = 4 << 20
)

// WithEnqueueCoalescing sets how many Enqueue RPCs the client keeps in
// flight before concurrent Enqueue calls share one RPC; 0 turns sharing
// off. Default DefaultEnqueueInflight.
//
// Below the limit every call is sent at once on its own, so a lone caller
// waits for nothing. While the limit is reached, calls queue, and the next
// free slot sends all of them as one request (up to 1,000 tasks and
// 4 MiB): group commit, the way Kafka producers batch without their
// linger. Each caller still gets exactly its own results. If the server
// refuses a shared request as invalid or too large, each caller's tasks are
// sent again on their own, so one caller's bad task fails that caller
// only; the idempotency keys make this safe.
func WithEnqueueCoalescing(inflight int) Option {
	return func(c *config) { c.enqueueInflight = inflight }
}

// enqueuer shares Enqueue RPCs between concurrent callers.
type enqueuer struct {
	c     *Client
	calls chan *enqCall
	sem   chan struct{}
	ctx   context.Context // ends when the Client closes
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

type enqCall struct {
	ctx   context.Context
	tasks []*docketv1.NewTask
	size  int
	reply chan enqReply // buffered: a flush never blocks on a caller
	// alone is set when the call is sent on its own, with the caller's
	// context: its answer then comes as soon as that context ends, and
	// the caller takes it, so that it sees exactly what an unshared call
	// would (and the client has forgotten a leader that let it time out).
	alone atomic.Bool
}

type enqReply struct {
	items []*docketv1.ItemResult
	err   error
}

func newEnqueuer(c *Client, inflight int) *enqueuer {
	ctx, stop := context.WithCancel(context.Background())
	e := &enqueuer{c: c, calls: make(chan *enqCall, 4096), sem: make(chan struct{}, inflight), ctx: ctx, stop: stop}
	e.wg.Add(1)
	go e.run()
	return e
}

// close stops the loop and waits for the RPCs in flight.
func (e *enqueuer) close() {
	e.stop()
	e.wg.Wait()
}

// do sends tasks, alone or sharing an RPC, and returns their results.
func (e *enqueuer) do(ctx context.Context, tasks []*docketv1.NewTask) ([]*docketv1.ItemResult, error) {
	size := 0
	for _, t := range tasks {
		size += proto.Size(t)
	}
	call := &enqCall{ctx: ctx, tasks: tasks, size: size, reply: make(chan enqReply, 1)}
	select {
	case e.calls <- call:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", opEnqueue.name, ctx.Err())
	case <-e.ctx.Done():
		return nil, fmt.Errorf("%s: %w", opEnqueue.name, ErrClosed)
	}
	select {
	case r := <-call.reply:
		return r.items, r.err
	case <-ctx.Done():
		if call.alone.Load() {
			r := <-call.reply
			return r.items, r.err
		}
		// The shared RPC may still enqueue these tasks.
		return nil, fmt.Errorf("%s: %w: %w", opEnqueue.name, ErrOutcomeUnknown, ctx.Err())
	}
}

func (e *enqueuer) run() {
	defer e.wg.Done()
	var carry *enqCall // a call that did not fit the last request
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-e.calls:
			case <-e.ctx.Done():
				e.drain()
				return
			}
		}
		// Wait for a slot before collecting: what arrives meanwhile is
		// what the next request carries.
		select {
		case e.sem <- struct{}{}:
		case <-e.ctx.Done():
			first.reply <- enqReply{err: fmt.Errorf("%s: %w", opEnqueue.name, ErrClosed)}
			e.drain()
			return
		}
		batch, n, size := []*enqCall{first}, len(first.tasks), first.size
	collect:
		for {
			select {
			case call := <-e.calls:
				if n+len(call.tasks) > maxSharedTasks || size+call.size > maxSharedBytes {
					carry = call
					break collect
				}
				batch = append(batch, call)
				n, size = n+len(call.tasks), size+call.size
			default:
				break collect
			}
		}
		e.wg.Add(1)
		go e.send(batch)
	}
}

// drain answers the calls still queued when the Client closes.
func (e *enqueuer) drain() {
	for {
		select {
		case call := <-e.calls:
			call.reply <- enqReply{err: fmt.Errorf("%s: %w", opEnqueue.name, ErrClosed)}
		default:
			return
		}
	}
}

// send makes one RPC for the live calls of batch and hands each caller its
// results. It holds a slot of e.sem until the answers are out.
func (e *enqueuer) send(batch []*enqCall) {
	defer e.wg.Done()
	defer func() { <-e.sem }()
	live := batch[:0]
	var deadline time.Time
	unbounded := false
	var tasks []*docketv1.NewTask
	for _, call := range batch {
		if call.ctx.Err() != nil {
			continue // the caller has gone with an error: send nothing
		}
		live = append(live, call)
		tasks = append(tasks, call.tasks...)
		if d, ok := call.ctx.Deadline(); !ok {
			unbounded = true
		} else if d.After(deadline) {
			deadline = d
		}
	}
	switch len(live) {
	case 0:
		return
	case 1:
		live[0].alone.Store(true)
		items, err := e.c.enqueueRPC(live[0].ctx, live[0].tasks)
		live[0].reply <- enqReply{items, err}
		return
	}
	// The request serves every caller: it may run until the last of their
	// deadlines, and ends early only when the Client closes.
	ctx, cancel := e.ctx, context.CancelFunc(func() {})
	if !unbounded {
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	defer cancel()
	items, err := e.c.enqueueRPC(ctx, tasks)
	if errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrTooLarge) {
		// Nothing was enqueued: let each caller's own tasks answer.
		var wg sync.WaitGroup
		for _, call := range live {
			wg.Add(1)
			go func() {
				defer wg.Done()
				items, err := e.c.enqueueRPC(call.ctx, call.tasks)
				call.reply <- enqReply{items, err}
			}()
		}
		wg.Wait()
		return
	}
	off := 0
	for _, call := range live {
		r := enqReply{err: err}
		if err == nil {
			r.items = items[off : off+len(call.tasks)]
		}
		off += len(call.tasks)
		call.reply <- r
	}
}
