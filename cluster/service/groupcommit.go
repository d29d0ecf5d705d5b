package service

import (
	"context"
	"fmt"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/lane"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// coalescer folds the client commands (Enqueue, Claim, Heartbeat,
// Submit, Nack, Cancel) of concurrent callers into Batch entries on the
// leader: group commit. It never waits to fill a batch. A command is proposed at once
// while fewer than ServiceConfig.CoalesceInflight entries are in flight, alone
// and unwrapped, so a lone caller pays nothing; only while all of them
// are in flight do later commands queue up, and the next free slot takes
// every one of them in one entry. Under load that turns hundreds of
// callers' Raft entries, futures, log writes and per-entry FSM work into
// a few, without a timer in the path.
//
// A Service runs two: one for heartbeats and one for every other client
// command, each with its own slots. Sharing one lane cost heartbeats a
// quarter of their throughput (BENCHMARKS.md): they queued behind enqueues
// and claims.
type coalescer struct {
	s    *Service
	lane *lane.Lane[*coCall]
}

type coCall struct {
	ctx   context.Context
	cmd   *pb.Command
	size  int          // encoded bytes of cmd
	reply chan coReply // buffered: the flush never blocks on a caller
	// orphan, when set, gets the result of a command whose caller left
	// before it was ready; the proposal then waits for the outcome
	// instead of ending at the callers' deadlines.
	orphan func(*pb.CommandResult)
	state  atomic.Int32 // callWaiting, then callTaken or callLeft
}

const (
	callWaiting int32 = iota
	callTaken         // the result went to the caller
	callLeft          // the caller left first
)

// deliver hands r to the caller, or to orphan when the caller has left.
func (c *coCall) deliver(r coReply) {
	if c.state.CompareAndSwap(callWaiting, callTaken) {
		c.reply <- r
		return
	}
	if c.orphan != nil && r.err == nil && r.res != nil {
		c.orphan(r.res)
	}
}

// leave is the caller giving up at ctx's end. It reports false when the
// result was already handed over: the caller must then take it from
// reply, where it is.
func (c *coCall) leave() bool { return c.state.CompareAndSwap(callWaiting, callLeft) }

type coReply struct {
	res *pb.CommandResult
	err error
}

// maxBatchBytes bounds the encoded commands of one Batch entry, so a
// coalesced entry stays the size of a large single request. A command
// larger than this goes alone.
const maxBatchBytes = 4 << 20

func newCoalescer(s *Service, inflight int) *coalescer {
	co := &coalescer{s: s}
	measure := func(c *coCall) (int, int) { return fsm.Positions(c.cmd), c.size }
	co.lane = lane.New(4096, inflight, lane.Bounds{Calls: s.cfg.CoalesceMax, Weight: maxEntryPositions, Bytes: maxBatchBytes}, measure, co.flush)
	return co
}

// Propose runs cmd on this node, the leader, and returns the FSM's answer;
// a whole-command rejection is the answer's error code, not an error.
// Concurrent client commands share Batch entries (group commit); a command
// is proposed at once, alone, while few are in flight, so a lone caller
// pays nothing. Errors: *replica.NotLeaderError (nothing proposed),
// replica.ErrLeadershipLost and context errors (outcome unknown), replica.ErrShutdown.
func (s *Service) Propose(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	return s.ProposeOrphan(ctx, cmd, nil)
}

// ProposeOrphan is Propose whose result, when ctx ends before it is ready,
// goes to orphan (see coCall.orphan) instead of being lost. A result that
// arrives together with the end of ctx is returned: the caller sees
// ctx.Err() and decides.
func (s *Service) ProposeOrphan(ctx context.Context, cmd *pb.Command, orphan func(*pb.CommandResult)) (*pb.CommandResult, error) {
	alone := s.cfg.CoalesceMax <= 1 || !fsm.Batchable(cmd.GetType())
	if alone && orphan == nil {
		return s.apply(ctx, cmd)
	}
	if !alone && orphan == nil {
		co := s.co
		if cmd.GetType() == pb.CommandType_COMMAND_TYPE_HEARTBEAT {
			co = s.hb
		}
		if done := co.lane.TryAlone(); done != nil {
			// Nothing queued and a slot free: propose on this goroutine, as
			// the lane's flush would have alone, without its hand-offs.
			defer done()
			return co.proposeAlone(ctx, cmd)
		}
	}
	c := &coCall{ctx: ctx, cmd: cmd, size: proto.Size(cmd), reply: make(chan coReply, 1), orphan: orphan}
	if alone {
		if !s.spawn(func() {
			res, err := s.apply(s.ctx, cmd) // bounded by Raft, not the caller
			c.deliver(coReply{res, err})
		}) {
			return nil, replica.ErrShutdown
		}
	} else {
		co := s.co
		if cmd.GetType() == pb.CommandType_COMMAND_TYPE_HEARTBEAT {
			co = s.hb
		}
		select {
		case co.lane.Calls() <- c:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.ctx.Done():
			return nil, replica.ErrShutdown
		}
	}
	var r coReply
	select {
	case r = <-c.reply:
	case <-ctx.Done():
		if c.leave() {
			// Like an abandoned proposal: the command may still apply.
			return nil, ctx.Err()
		}
		r = <-c.reply
	case <-s.ctx.Done():
		if c.leave() {
			return nil, replica.ErrShutdown
		}
		r = <-c.reply
	}
	return r.res, r.err
}

// proposeAlone is a flush of one call, on its caller's goroutine: a
// caller that already left proposes nothing, and the entry runs until the
// caller's deadline, as flush's would. One difference: a caller that stops
// waiting (its ctx ends) frees its slot then, not when the entry applies;
// the slots bound batching, and the entry in flight is Raft's to bound.
func (co *coalescer) proposeAlone(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if co.s.ctx.Err() != nil {
		return nil, replica.ErrShutdown
	}
	co.s.metrics.coBatch.Observe(1)
	return co.s.apply(ctx, cmd)
}

// run forms entries until the service closes; the callers still queued
// then see the service's end themselves.
func (co *coalescer) run() {
	defer co.s.wg.Done()
	co.lane.Run(co.s.ctx)
}

// maxEntryPositions is the task positions one entry has room for (see
// fsm.Positions).
const maxEntryPositions = 1 << 16

// flush proposes the live calls of batch as one entry, in the background,
// and hands each caller its own result. It holds its lane slot (done)
// until the entry is applied.
func (co *coalescer) flush(batch []*coCall, done func()) {
	live := batch[:0]
	var until lane.Latest
	for _, c := range batch {
		if c.ctx.Err() != nil {
			continue // the caller is gone and told; do not run its command
		}
		live = append(live, c)
		until.Add(c.ctx)
		if c.orphan != nil {
			// Its result must be known even after its caller left.
			until.Unbound()
		}
	}
	if len(live) == 0 {
		done()
		return
	}
	co.s.metrics.coBatch.Observe(float64(len(live)))
	co.s.wg.Add(1)
	go func() {
		defer co.s.wg.Done()
		defer done()
		ctx, cancel := until.Context(co.s.ctx)
		defer cancel()
		groups := mergeHeartbeats(live)
		if len(groups) == 1 {
			res, err := co.s.apply(ctx, groups[0].cmd)
			groups[0].deliver(res, err)
			return
		}
		cmds := make([]*pb.Command, len(groups))
		for i, g := range groups {
			cmds[i] = g.cmd
		}
		res, err := co.s.apply(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_BATCH,
			Body: &pb.Command_Batch{Batch: &pb.BatchCmd{Commands: cmds}}})
		if err == nil {
			err = pb.ResultError(res)
		}
		if err == nil && len(res.GetResults()) != len(groups) {
			err = fmt.Errorf("fsm answered %d results for a batch of %d", len(res.GetResults()), len(groups))
		}
		for i, g := range groups {
			if err != nil {
				g.deliver(nil, err)
				continue
			}
			g.deliver(res.GetResults()[i], nil)
		}
	}()
}

// group is one command of an entry and the calls it answers: one call, or
// a run of adjacent Heartbeat calls merged into one Heartbeat command.
type group struct {
	cmd   *pb.Command
	calls []*coCall
}

// mergeHeartbeats folds each run of adjacent Heartbeat calls into one
// Heartbeat command of at most pb.MaxBatch items. A heartbeat is a small
// command, and as one of many in a Batch its per-command work in the FSM
// cost a third of the heartbeat throughput the separate batcher had
// (BENCHMARKS.md); merged, it costs what one command of many items does.
// Only adjacent calls merge, so no command moves past another.
func mergeHeartbeats(calls []*coCall) []group {
	groups := make([]group, 0, len(calls))
	items := 0
	for _, c := range calls {
		hb := c.cmd.GetType() == pb.CommandType_COMMAND_TYPE_HEARTBEAT
		n := len(c.cmd.GetHeartbeat().GetItems())
		if last := len(groups) - 1; hb && last >= 0 && groups[last].cmd.GetType() == pb.CommandType_COMMAND_TYPE_HEARTBEAT &&
			items+n <= pb.MaxBatch {
			g := &groups[last]
			if len(g.calls) == 1 { // copy before appending: the first call's command is its own
				g.cmd = HeartbeatCommand(append([]*pb.HeartbeatItem(nil), g.cmd.GetHeartbeat().GetItems()...))
			}
			g.cmd.GetHeartbeat().Items = append(g.cmd.GetHeartbeat().Items, c.cmd.GetHeartbeat().GetItems()...)
			g.calls = append(g.calls, c)
			items += n
			continue
		}
		groups = append(groups, group{cmd: c.cmd, calls: []*coCall{c}})
		items = n
	}
	return groups
}

// deliver hands each call of g its result: a merged Heartbeat's items are
// split back by each call's own count, in its order.
func (g group) deliver(res *pb.CommandResult, err error) {
	if len(g.calls) == 1 || err != nil || res.GetErrorCode() != pb.Code_CODE_OK {
		for _, c := range g.calls {
			c.deliver(coReply{res, err})
		}
		return
	}
	total := 0
	for _, c := range g.calls {
		total += len(c.cmd.GetHeartbeat().GetItems())
	}
	if len(res.GetItems()) != total {
		err := fmt.Errorf("fsm answered %d items for %d merged heartbeats", len(res.GetItems()), total)
		for _, c := range g.calls {
			c.deliver(coReply{nil, err})
		}
		return
	}
	off := 0
	for _, c := range g.calls {
		n := len(c.cmd.GetHeartbeat().GetItems())
		c.deliver(coReply{res: &pb.CommandResult{Index: res.GetIndex(), Now: res.GetNow(), Items: res.GetItems()[off : off+n]}})
		off += n
	}
}
