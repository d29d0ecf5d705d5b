package transport

import (
	"context"
	"fmt"
	"time"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// maxInflightBatches bounds the Heartbeat commands proposed at once. While
// they are all in flight the batcher stops collecting, and heartbeats queue
// up for the next, larger batch.
const maxInflightBatches = 4

// Heartbeat extends leases. On the leader, concurrent Heartbeat calls are
// folded into one Heartbeat command by the batcher; each caller gets the
// results of its own items, in its order.
func (q *queueService) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	s := q.s
	// Validate the caller's own items, so a bad one fails this call alone
	// and names the field by the caller's index.
	cmd := heartbeatCmd(req.GetItems())
	if err := fsm.Validate(cmd, s.node.Limits()); err != nil {
		return nil, err
	}
	return onLeader(s, ctx, pb.Queue_Heartbeat_FullMethodName, req, &pb.HeartbeatResponse{},
		func(ctx context.Context) (*pb.HeartbeatResponse, error) {
			items, err := s.hb.do(ctx, req.GetItems())
			if err != nil {
				return nil, err
			}
			return &pb.HeartbeatResponse{Items: items}, nil
		})
}

func heartbeatCmd(items []*pb.HeartbeatItem) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_HEARTBEAT,
		Body: &pb.Command_Heartbeat{Heartbeat: &pb.HeartbeatCmd{Items: items}}}
}

// batcher coalesces heartbeats. Its goroutine takes the first waiting
// call, collects more for Config.HeartbeatWindow or until the batch holds
// HeartbeatMaxItems, then proposes one command for all of them.
type batcher struct {
	s     *Server
	calls chan *hbCall
	sem   chan struct{}
}

type hbCall struct {
	ctx   context.Context
	items []*pb.HeartbeatItem
	reply chan hbReply // buffered: the flush never blocks on a caller
}

type hbReply struct {
	items []*pb.ItemResult
	err   error
}

func newBatcher(s *Server) *batcher {
	return &batcher{
		s:     s,
		calls: make(chan *hbCall, 1024),
		sem:   make(chan struct{}, maxInflightBatches),
	}
}

// do hands items to the batcher and waits for their results.
func (b *batcher) do(ctx context.Context, items []*pb.HeartbeatItem) ([]*pb.ItemResult, error) {
	c := &hbCall{ctx: ctx, items: items, reply: make(chan hbReply, 1)}
	select {
	case b.calls <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.s.ctx.Done():
		return nil, errShutdown
	}
	select {
	case r := <-c.reply:
		return r.items, r.err
	case <-ctx.Done():
		// The command may still apply: a heartbeat is safe to repeat.
		return nil, ctx.Err()
	case <-b.s.ctx.Done():
		return nil, errShutdown
	}
}

func (b *batcher) run() {
	defer b.s.wg.Done()
	window, maxItems := b.s.cfg.HeartbeatWindow, b.s.cfg.HeartbeatMaxItems
	var carry *hbCall // a call that did not fit the last batch
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-b.calls:
			case <-b.s.ctx.Done():
				return
			}
		}
		batch, n := []*hbCall{first}, len(first.items)
		t := time.NewTimer(window)
	collect:
		for n < maxItems {
			select {
			case c := <-b.calls:
				if n+len(c.items) > maxItems {
					carry = c
					break collect
				}
				batch = append(batch, c)
				n += len(c.items)
			case <-t.C:
				break collect
			case <-b.s.ctx.Done():
				t.Stop()
				return // the callers see the server's end themselves
			}
		}
		t.Stop()
		b.flush(batch)
	}
}

// flush proposes one Heartbeat command for the live calls of batch and
// hands each its slice of the results. It returns once the proposal is
// under way.
func (b *batcher) flush(batch []*hbCall) {
	live := batch[:0]
	var items []*pb.HeartbeatItem
	var until latest
	for _, c := range batch {
		if c.ctx.Err() != nil {
			continue // the caller gave up: do not extend its leases
		}
		live = append(live, c)
		items = append(items, c.items...)
		until.add(c.ctx)
	}
	if len(live) == 0 {
		return
	}
	select {
	case b.sem <- struct{}{}:
	case <-b.s.ctx.Done():
		return
	}
	b.s.metrics.hbBatch.Observe(float64(len(items)))
	b.s.wg.Add(1)
	go func() {
		defer b.s.wg.Done()
		defer func() { <-b.sem }()
		ctx, cancel := until.context(b.s.ctx)
		defer cancel()
		res, err := b.s.propose(ctx, heartbeatCmd(items))
		if err == nil && len(res.GetItems()) != len(items) {
			err = fmt.Errorf("fsm answered %d items for %d heartbeats", len(res.GetItems()), len(items))
		}
		off := 0
		for _, c := range live {
			r := hbReply{err: err}
			if err == nil {
				r.items = res.GetItems()[off : off+len(c.items)]
			}
			off += len(c.items)
			c.reply <- r
		}
	}()
}
