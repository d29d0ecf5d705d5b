package transport

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/stats"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// minRetry keeps a wait for a delayed task that is already due (by the
// node's clock, not yet by the FSM's) from spinning.
const minRetry = time.Millisecond

// Claim takes up to max_tasks (default 1) tasks under a lease (default
// Config.DefaultLease), waiting up to min(wait_ns, MaxClaimWait) for one,
// and answering empty before the caller's deadline rather than miss it.
// It runs on the leader: a follower forwards the whole long poll.
//
// The wait is driven by the FSM, not a timer: the claimer watches its
// queue, and wakes when an applied batch makes a task of it pending, or
// when the queue's next delayed task becomes visible. It proposes a Claim
// only when the leader's replica shows something to claim, so an idle
// worker's poll costs no Raft entry.
func (q *queueService) Claim(ctx context.Context, req *pb.ClaimRequest) (*pb.ClaimResponse, error) {
	s := q.s
	if req.GetTenant() == "" {
		req.Tenant = DefaultTenant
	}
	if req.GetMaxTasks() == 0 {
		req.MaxTasks = 1
	}
	if req.GetLeaseNs() == 0 {
		req.LeaseNs = int64(s.cfg.DefaultLease)
	}
	if req.GetWaitNs() < 0 {
		return nil, fieldError("wait_ns", "negative")
	}
	cmd := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CLAIM, Body: &pb.Command_Claim{Claim: &pb.ClaimCmd{
		Queue: req.GetQueue(), Tenant: req.GetTenant(), WorkerId: req.GetWorkerId(),
		LeaseNs: req.GetLeaseNs(), MaxTasks: req.GetMaxTasks(),
	}}}
	if err := fsm.Validate(cmd, s.node.Limits()); err != nil {
		return nil, err
	}
	wait := min(time.Duration(req.GetWaitNs()), s.cfg.MaxClaimWait)
	if wait > 0 {
		release, err := s.polls.acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return onLeader(s, ctx, pb.Queue_Claim_FullMethodName, req, &pb.ClaimResponse{},
		func(ctx context.Context) (*pb.ClaimResponse, error) {
			return s.claim(ctx, cmd, wait)
		})
}

func (s *Server) claim(ctx context.Context, cmd *pb.Command, wait time.Duration) (*pb.ClaimResponse, error) {
	deadline := time.Now().Add(waitBudget(ctx, wait))
	ref := fsm.QueueRef{Queue: cmd.GetClaim().GetQueue(), Tenant: cmd.GetClaim().GetTenant()}
	want := int(cmd.GetClaim().GetMaxTasks())
	for {
		wake, release := s.hub.watchQueue(ref)
		if n, next := s.admit(ref, want); n > 0 {
			release() // not a waiter while it proposes
			res, err := s.proposeClientOrphan(ctx, cmd, s.undelivered)
			s.gate.release(ref, n)
			// Waiters held back by this claim's reservation may now have
			// room: the claim has applied, so the counts include it.
			s.hub.wakeQueue(ref)
			if err != nil {
				return nil, err
			}
			if len(res.GetTasks()) > 0 {
				if err := ctx.Err(); err != nil {
					s.undelivered(res) // the caller left as the claim applied
					return nil, err
				}
				if slot, ok := ctx.Value(claimSlotKey{}).(*claimSlot); ok {
					slot.res.Store(res) // for claimWatch, if the send fails
				}
				return &pb.ClaimResponse{Tasks: res.GetTasks()}, nil
			}
			if time.Until(deadline) <= 0 {
				return &pb.ClaimResponse{}, nil
			}
			continue // others took them first: look again, then wait
		} else if left := time.Until(deadline); left > 0 {
			if next > 0 {
				left = min(left, max(time.Duration(next-s.node.Now().UnixNano()), minRetry))
			}
			err := s.sleep(ctx, wake, left)
			release()
			if err == nil && !s.draining() {
				continue
			}
			// A wake-up this waiter will not use goes to the next one.
			s.hub.wakeQueue(ref)
			if err != nil {
				return nil, err
			}
		}
		release()
		return &pb.ClaimResponse{}, nil
	}
}

// admit decides whether a waiting Claim for up to want tasks of ref
// proposes now, and reserves what it may take. Without it every waiter of
// a queue proposed a Claim on each enqueue, and all but a few were empty
// claims applied on every replica. It returns the reservation (0: wait)
// and when the next delayed task becomes visible (0: none).
func (s *Server) admit(ref fsm.QueueRef, want int) (int, int64) {
	var next int64
	n := s.gate.reserve(ref, want, func() int {
		pending, due, nv := s.claimable(ref)
		next = nv
		if due {
			return math.MaxInt
		}
		return pending
	})
	return n, next
}

// avail is how many Claims of ref may propose now: pending tasks not
// reserved by claims in flight, or every waiter when a delayed task is due
// (a claim promotes it itself, and the count of due tasks is not at hand).
func (s *Server) avail(ref fsm.QueueRef) int {
	pending, due, _ := s.claimable(ref)
	if due {
		return math.MaxInt
	}
	return s.gate.free(ref, pending)
}

// claimable looks at the local replica: how many tasks of ref are pending,
// whether a delayed one is already due, and when the next delayed task
// becomes visible (0 when none). On a read error it answers due, so the
// Claim command decides.
func (s *Server) claimable(ref fsm.QueueRef) (pending int, due bool, nextVisible int64) {
	f := s.node.FSM()
	// One catalog read: Stats would also seek every priority's head to
	// find the oldest pending task, which a claim does not need.
	p, delayed, err := f.Counts(ref.Queue, ref.Tenant)
	if err != nil {
		return 0, true, 0
	}
	if p > 0 || delayed == 0 {
		return int(p), false, 0
	}
	head, _, err := f.ListTasks(ref.Queue, ref.Tenant, pb.TaskState_TASK_STATE_DELAYED, "", 1)
	if err != nil || len(head) == 0 {
		return 0, true, 0
	}
	vis := head[0].GetVisibleAt()
	return 0, vis <= s.node.Now().UnixNano(), vis
}

// claimGate holds the tasks that claims in flight have reserved, per queue.
type claimGate struct {
	mu       sync.Mutex
	reserved map[fsm.QueueRef]int
}

func newClaimGate() *claimGate { return &claimGate{reserved: map[fsm.QueueRef]int{}} }

// reserve takes up to want of the tasks of ref that avail reports and no
// claim in flight has reserved. avail reads the replica under the gate's
// lock: read outside it, a claim could apply and release its reservation
// between the read and the reservation, and the stale count would let a
// second claim propose for the same task.
func (g *claimGate) reserve(ref fsm.QueueRef, want int, avail func() int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(want, avail()-g.reserved[ref])
	if n <= 0 {
		return 0
	}
	g.reserved[ref] += n
	return n
}

// free is how many of the avail tasks of ref no claim has reserved.
func (g *claimGate) free(ref fsm.QueueRef, avail int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return max(avail-g.reserved[ref], 0)
}

func (g *claimGate) release(ref fsm.QueueRef, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reserved[ref] -= n; g.reserved[ref] <= 0 {
		delete(g.reserved, ref)
	}
}

// waitBudget shortens a wait to end before the caller's deadline, leaving a
// tenth of the time left (at most a second) for the answer to travel: an
// empty answer is more use to a caller than DeadlineExceeded.
func waitBudget(ctx context.Context, wait time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		wait = min(wait, left-min(left/10, time.Second))
	}
	return max(wait, 0)
}

// sleep waits for wake, d, ctx or the start of Stop. Only ctx is an error.
func (s *Server) sleep(ctx context.Context, wake <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	s.metrics.waiters.Inc()
	defer s.metrics.waiters.Dec()
	select {
	case <-wake:
	case <-t.C:
	case <-s.drain:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (s *Server) draining() bool {
	select {
	case <-s.drain:
		return true
	default:
		return false
	}
}

// WaitResult waits up to min(wait_ns, MaxResultWait) for a task to end:
// completed, failed, cancelled or dead. It runs on the leader and starts
// with a read barrier, so a task acknowledged anywhere is found; it then
// waits on the leader's replica for the FSM to report the task finished.
// done is false when the wait ran out (or the server began to stop) first.
func (q *queueService) WaitResult(ctx context.Context, req *pb.WaitResultRequest) (*pb.WaitResultResponse, error) {
	s := q.s
	if req.GetTaskId() == "" {
		return nil, fieldError("task_id", "required")
	}
	if req.GetWaitNs() < 0 {
		return nil, fieldError("wait_ns", "negative")
	}
	wait := min(time.Duration(req.GetWaitNs()), s.cfg.MaxResultWait)
	if wait > 0 {
		release, err := s.polls.acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return onLeader(s, ctx, pb.Queue_WaitResult_FullMethodName, req, &pb.WaitResultResponse{},
		func(ctx context.Context) (*pb.WaitResultResponse, error) {
			if err := s.node.ReadBarrier(ctx); err != nil {
				return nil, err
			}
			return s.waitResult(ctx, req.GetTaskId(), wait)
		})
}

func (s *Server) waitResult(ctx context.Context, id string, wait time.Duration) (*pb.WaitResultResponse, error) {
	deadline := time.Now().Add(waitBudget(ctx, wait))
	for {
		wake, release := s.hub.watchTask(id)
		t, err := s.node.FSM().GetTask(id)
		if err != nil {
			release()
			return nil, err
		}
		left := time.Until(deadline)
		if finished(t.GetState()) || left <= 0 || s.draining() {
			release()
			return &pb.WaitResultResponse{Task: t, Done: finished(t.GetState())}, nil
		}
		err = s.sleep(ctx, wake, left)
		release()
		if err != nil {
			return nil, err
		}
	}
}

func finished(st pb.TaskState) bool {
	switch st {
	case pb.TaskState_TASK_STATE_COMPLETED, pb.TaskState_TASK_STATE_FAILED,
		pb.TaskState_TASK_STATE_CANCELLED, pb.TaskState_TASK_STATE_DEAD:
		return true
	}
	return false
}

// undelivered takes the result of a Claim whose caller is gone: its tasks
// are RUNNING under a lease nobody holds. It counts them and proposes a
// Release in the background, which puts each back to pending without an
// attempt while the claim's fence still holds (fsm release). Without it
// each such task waited out its lease and was charged an attempt when
// reaped: a slow claim of large tasks dead-lettered them.
func (s *Server) undelivered(res *pb.CommandResult) {
	tasks := res.GetTasks()
	if len(tasks) == 0 {
		return
	}
	s.metrics.undelivered.Add(float64(len(tasks)))
	items := make([]*pb.ReapItem, len(tasks))
	for i, t := range tasks {
		items[i] = &pb.ReapItem{TaskId: t.GetId(), Fence: t.GetFence()}
	}
	s.wg.Add(1) // callers hold a count of s.wg themselves, or run before Stop
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, releaseTimeout)
		defer cancel()
		res, err := s.propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_RELEASE,
			Body: &pb.Command_Release{Release: &pb.ReleaseCmd{Items: items}}})
		if err != nil {
			// Not applied, or unknown: the leases expire and the reaper
			// requeues the tasks, with an attempt counted.
			s.log.Warn("releasing undelivered claimed tasks failed; their leases will expire",
				"tasks", len(items), "err", err)
			return
		}
		released := 0
		for _, it := range res.GetItems() {
			if it.GetCode() == pb.Code_CODE_OK {
				released++
			}
		}
		s.metrics.released.Add(float64(released))
		s.log.Info("released undelivered claimed tasks", "tasks", len(items), "released", released)
	}()
}

// releaseTimeout bounds the proposal of a Release. Past it the leases
// expire instead, which is where the tasks went before releases existed.
const releaseTimeout = 10 * time.Second

// claimWatch is a gRPC stats handler that sees the end of each Claim: when
// the handler answered tasks but gRPC could not send the answer (the
// caller reset the stream, the connection broke), they are undelivered.
// An answer lost after it was written to the connection is not seen; its
// leases expire and the reaper counts an attempt, as before.
type claimWatch struct{ s *Server }

type claimSlotKey struct{}

// claimSlot carries a Claim's answer from the handler to claimWatch.
type claimSlot struct {
	res atomic.Pointer[pb.CommandResult]
}

func (w claimWatch) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if info.FullMethodName != pb.Queue_Claim_FullMethodName {
		return ctx
	}
	return context.WithValue(ctx, claimSlotKey{}, &claimSlot{})
}

func (w claimWatch) HandleRPC(ctx context.Context, st stats.RPCStats) {
	end, ok := st.(*stats.End)
	if !ok || end.Error == nil {
		return
	}
	if slot, ok := ctx.Value(claimSlotKey{}).(*claimSlot); ok {
		if res := slot.res.Swap(nil); res != nil {
			w.s.undelivered(res)
		}
	}
}

func (claimWatch) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (claimWatch) HandleConn(context.Context, stats.ConnStats)                       {}
