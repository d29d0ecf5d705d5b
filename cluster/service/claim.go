package service

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// minRetry keeps a wait for a delayed task that is already due (by the
// node's clock, not yet by the FSM's) from spinning.
const minRetry = time.Millisecond

// Claim runs a Claim command on this node, the leader, waiting up to wait
// for a task, and answering empty before ctx's deadline rather than miss
// it. The caller checked and normalised cmd (ClaimCommand).
//
// The wait is driven by the FSM, not a timer: the claimer watches its
// queue, and wakes when an applied batch makes a task of it pending, or
// when the queue's next delayed task becomes visible. It proposes a Claim
// only when the leader's replica shows something to claim, so an idle
// worker's poll costs no Raft entry.
//
// Tasks claimed after ctx ended are released here (Release); the API layer
// releases those it then fails to deliver (ReleaseTasks).
func (s *Service) Claim(ctx context.Context, cmd *pb.Command, wait time.Duration) ([]*pb.Task, error) {
	deadline := time.Now().Add(waitBudget(ctx, wait))
	settleBy := time.Now().Add(waitBudget(ctx, wait+maxSettle))
	ref := fsm.QueueRef{Queue: cmd.GetClaim().GetQueue(), Tenant: cmd.GetClaim().GetTenant()}
	want := int(cmd.GetClaim().GetMaxTasks())
	for {
		wake, release := s.hub.watchQueue(ref)
		n, next, settled := s.admit(ref, want)
		if n > 0 {
			release() // not a waiter while it proposes
			res, err := s.ProposeOrphan(ctx, cmd, s.Release)
			s.gate.release(ref, n)
			// Waiters held back by this claim's reservation may now have
			// room: the claim has applied, so the counts include it.
			s.wakeQueue(ref)
			if err == nil {
				err = pb.ResultError(res)
			}
			if err != nil {
				return nil, err
			}
			if len(res.GetTasks()) > 0 {
				if err := ctx.Err(); err != nil {
					s.Release(res) // the caller left as the claim applied
					return nil, err
				}
				return res.GetTasks(), nil
			}
			if time.Until(deadline) <= 0 {
				return nil, nil
			}
			continue // others took them first: look again, then wait
		} else if left := time.Until(deadline); left > 0 {
			if next > 0 {
				left = min(left, max(time.Duration(next-s.r.Now().UnixNano()), minRetry))
			}
			err := s.sleep(ctx, wake, left)
			release()
			if err == nil && !s.draining() {
				continue
			}
			// A wake-up this waiter will not use goes to the next one.
			s.wakeQueue(ref)
			if err != nil {
				return nil, err
			}
		} else if left := time.Until(settleBy); settled != nil && left > 0 && !s.draining() {
			// Nothing was free only because claims in flight still hold
			// reservations, though the replica may already show their
			// tasks claimed: the count is low until they release. Look
			// again then rather than answer empty on it. Without this,
			// the items of one ClaimBatch, which all claim at once,
			// answered empty while tasks were pending.
			release()
			if err := s.settle(ctx, settled, left); err != nil {
				return nil, err
			}
			continue
		}
		release()
		return nil, nil
	}
}

// maxSettle bounds how long a claim whose wait is over waits for claims
// in flight to release their reservations (admit): about one apply on a
// busy leader (claim p99 was 207 ms; BENCHMARKS.md). Past it the claim
// answers empty.
const maxSettle = 250 * time.Millisecond

// wakeQueue wakes as many waiters of ref as may claim now, asking the
// replica only when someone waits.
func (s *Service) wakeQueue(ref fsm.QueueRef) {
	if s.hub.hasWaiters(ref) {
		s.hub.wakeQueue(ref, s.avail(ref))
	}
}

// admit decides whether a waiting Claim for up to want tasks of ref
// proposes now, and reserves what it may take. Without it every waiter of
// a queue proposed a Claim on each enqueue, and all but a few were empty
// claims applied on every replica. It returns the reservation (0: wait),
// when the next delayed task becomes visible (0: none), and, when it
// reserved nothing while other claims of ref hold reservations, a channel
// closed when one of them releases.
func (s *Service) admit(ref fsm.QueueRef, want int) (int, int64, <-chan struct{}) {
	var next int64
	n, settled := s.gate.reserve(ref, want, func() int {
		pending, due, nv := s.claimable(ref, 0)
		next = nv
		if due {
			return math.MaxInt
		}
		return pending
	})
	return n, next, settled
}

// avail is how many Claims of ref may propose now: pending tasks not
// reserved by claims in flight, or every waiter when a delayed task is due
// (a claim promotes it itself, and the count of due tasks is not at hand).
func (s *Service) avail(ref fsm.QueueRef) int {
	pending, due, _ := s.claimable(ref, 0)
	if due {
		return math.MaxInt
	}
	return s.gate.free(ref, pending)
}

// claimable looks at the local replica: how many tasks of ref are pending
// within its pause and limits, whether a delayed one is already due, and
// when the next delayed task becomes visible or the rate limit's next
// token is due (0 when none). The FSM answers from the queue state apply
// keeps in memory (fsm.ClaimView), so the gate's lock holds no Pebble
// read. A paused queue, or one its limits leave nothing, has nothing to
// claim: its long polls wait as on an empty one. Resuming, a running
// task's end and a raised limit wake them (the FSM's Event); a rate
// limit's next token is their timer.
//
// freeing counts that many running tasks as ended first: a claim that
// rides on submits (fsm.FSM.ClaimViewAfter).
func (s *Service) claimable(ref fsm.QueueRef, freeing int) (pending int, due bool, nextVisible int64) {
	return s.r.FSM().ClaimViewAfter(ref, s.r.Now().UnixNano(), freeing)
}

// claimGate holds the tasks that claims in flight have reserved, per queue.
type claimGate struct {
	mu       sync.Mutex
	reserved map[fsm.QueueRef]int
	// released holds, per queue, a channel closed at its next release:
	// what a claim that found nothing free waits on (admit).
	released map[fsm.QueueRef]chan struct{}
}

func newClaimGate() *claimGate {
	return &claimGate{reserved: map[fsm.QueueRef]int{}, released: map[fsm.QueueRef]chan struct{}{}}
}

// reserve takes up to want of the tasks of ref that avail reports and no
// claim in flight has reserved. avail reads the replica under the gate's
// lock: read outside it, a claim could apply and release its reservation
// between the read and the reservation, and the stale count would let a
// second claim propose for the same task. When it reserves nothing while
// other claims of ref hold reservations, it returns a channel closed at
// the next release of ref, taken under the same lock so that no release
// falls between the count and the channel.
func (g *claimGate) reserve(ref fsm.QueueRef, want int, avail func() int) (int, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(want, avail()-g.reserved[ref])
	if n > 0 {
		g.reserved[ref] += n
		return n, nil
	}
	if g.reserved[ref] <= 0 {
		return 0, nil
	}
	ch, ok := g.released[ref]
	if !ok {
		ch = make(chan struct{})
		g.released[ref] = ch
	}
	return 0, ch
}

// take is reserve for a claim that costs no entry of its own, one that
// rides on submits: it takes up to want of the avail tasks whether or not
// other claims reserved them, and reserves what it took, so that claims
// of their own still count it. Rides that share an entry's slots free
// each other's: the running task one ride's submit ends is the slot
// another's reservation stands on, and held to the reservations, two
// rides at a running limit would each find the other's slot taken. A
// ride that loses the race to a task claims nothing in an entry that is
// written anyway.
func (g *claimGate) take(ref fsm.QueueRef, want int, avail func() int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := max(min(want, avail()), 0)
	g.reserved[ref] += n
	if g.reserved[ref] == 0 {
		delete(g.reserved, ref)
	}
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
	if ch, ok := g.released[ref]; ok {
		close(ch)
		delete(g.released, ref)
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

// settle waits for released, d, ctx or Drain, as sleep does, but is not a
// long-poll waiter: it only waits out claims in flight. Only ctx is an
// error.
func (s *Service) settle(ctx context.Context, released <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-released:
	case <-t.C:
	case <-s.drain:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// sleep waits for wake, d, ctx or Drain. Only ctx is an error.
func (s *Service) sleep(ctx context.Context, wake <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	s.metrics.waiters.Inc()
	s.hub.asleep.Add(1)
	defer func() {
		s.metrics.waiters.Dec()
		s.hub.asleep.Add(-1)
	}()
	select {
	case <-wake:
	case <-t.C:
	case <-s.drain:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// WaitResult waits up to wait for task id to end: completed, failed,
// cancelled or dead. It runs on the leader after a read barrier, so a task
// acknowledged anywhere is found, then waits on the leader's replica for
// the FSM to report the task finished. done is false when the wait ran out
// (or the service began to drain) first.
func (s *Service) WaitResult(ctx context.Context, id string, wait time.Duration) (t *pb.Task, done bool, err error) {
	if err := s.r.ReadBarrier(ctx); err != nil {
		return nil, false, err
	}
	deadline := time.Now().Add(waitBudget(ctx, wait))
	for {
		wake, release := s.hub.watchTask(id)
		t, err := s.r.FSM().GetTask(id)
		if err != nil {
			release()
			return nil, false, err
		}
		left := time.Until(deadline)
		if finished(t.GetState()) || left <= 0 || s.draining() {
			release()
			return t, finished(t.GetState()), nil
		}
		err = s.sleep(ctx, wake, left)
		release()
		if err != nil {
			return nil, false, err
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

// Release takes the result of a Claim whose caller is gone: its tasks are
// RUNNING under a lease nobody holds. It counts them and proposes a
// Release in the background, which puts each back to pending without an
// attempt while the claim's fence still holds (fsm release). Without it
// each such task waited out its lease and was charged an attempt when
// reaped: a slow claim of large tasks dead-lettered them.
func (s *Service) Release(res *pb.CommandResult) { s.ReleaseTasks(res.GetTasks()) }

// ReleaseTasks is Release for claimed tasks the API layer could not
// deliver.
func (s *Service) ReleaseTasks(tasks []*pb.Task) {
	if len(tasks) == 0 {
		return
	}
	s.metrics.undelivered.Add(float64(len(tasks)))
	s.orphans.add(tasks)
	items := make([]*pb.ReapItem, len(tasks))
	for i, t := range tasks {
		items[i] = &pb.ReapItem{TaskId: t.GetId(), Fence: t.GetFence()}
	}
	started := s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.ctx, releaseTimeout)
		defer cancel()
		res, err := s.apply(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_RELEASE,
			Body: &pb.Command_Release{Release: &pb.ReleaseCmd{Items: items}}})
		if err == nil {
			err = pb.ResultError(res)
		}
		if err != nil {
			// Not applied, or unknown: the leases expire and the reaper
			// requeues the tasks, with an attempt counted.
			s.log.Warn("releasing undelivered claimed tasks failed; their leases will expire",
				"tasks", len(items), "err", err)
			return
		}
		var back []*pb.ReapItem
		for i, it := range res.GetItems() {
			if it.GetCode() == pb.Code_CODE_OK && i < len(items) {
				back = append(back, items[i])
			}
		}
		released := len(back)
		// Put back, so no longer orphans; the others stay until their
		// lease ends (or a newer orphan takes their slot).
		s.orphans.forget(back)
		s.metrics.released.Add(float64(released))
		s.log.Info("released undelivered claimed tasks", "tasks", len(items), "released", released)
	})
	if !started {
		// Closing: the leases expire and the reaper requeues the tasks.
		s.log.Warn("not releasing undelivered claimed tasks while closing; their leases will expire", "tasks", len(items))
	}
}

// releaseTimeout bounds the proposal of a Release. Past it the leases
// expire instead, which is where the tasks went before releases existed.
const releaseTimeout = 10 * time.Second
