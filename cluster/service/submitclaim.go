package service

import (
	"context"
	"fmt"
	"math"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// SubmitThenClaim runs submits, a Batch of Submits (SubmitBatchCommand),
// and then claim, a Claim without a wait (ClaimCommand), in one Raft
// entry on this node, the leader. It returns the submits' result, one
// Result per Submit as SubmitBatch's, and the tasks claimed.
//
// A worker that drains a backlog submits a step's tasks and claims the
// next step's: two replicated rounds, each an fsync on a majority and an
// apply on every replica. In one entry the step costs one. The claim
// applies after the submits, and the gate looks before them, so it counts
// the submits' tasks as ended (admitAfter): a queue, tenant or key at its
// running limit gets the slots they free.
//
// The claim is added only when the leader's replica shows a task to take
// once the submits end theirs, so a worker at the end of a backlog adds
// no empty claims to the log; it then gets no tasks and claims with a
// wait. Rides racing for the last tasks may each add one.
// Tasks claimed for a caller that left are released, as Claim's are; the
// submits stand.
func (s *Service) SubmitThenClaim(ctx context.Context, submits, claim *pb.Command) (*pb.CommandResult, []*pb.Task, error) {
	ref := fsm.QueueRef{Queue: claim.GetClaim().GetQueue(), Tenant: claim.GetClaim().GetTenant()}
	n := 0
	if s.r.EnabledLevel() >= fsm.LevelBatch {
		// Below it a Batch's commands run as entries of their own, in no
		// order (applyEach): the claim would gain nothing.
		n = s.admitAfter(ref, int(claim.GetClaim().GetMaxTasks()), len(submits.GetBatch().GetCommands()))
	}
	if n == 0 {
		res, err := s.Propose(ctx, submits)
		return res, nil, err
	}
	subs := submits.GetBatch().GetCommands()
	cmds := make([]*pb.Command, 0, len(subs)+1)
	cmds = append(append(cmds, subs...), claim)
	both := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_BATCH, Body: &pb.Command_Batch{Batch: &pb.BatchCmd{Commands: cmds}}}
	res, err := s.ProposeOrphan(ctx, both, func(r *pb.CommandResult) { s.ReleaseTasks(claimed(r)) })
	s.gate.release(ref, n)
	s.wakeQueue(ref)
	if err != nil {
		return nil, nil, err
	}
	if err := pb.ResultError(res); err != nil {
		return res, nil, nil // rejected whole: the caller reads it as SubmitBatch's
	}
	rs := res.GetResults()
	if len(rs) != len(cmds) {
		return nil, nil, fmt.Errorf("submit then claim: fsm answered %d results for %d commands", len(rs), len(cmds))
	}
	tasks := claimed(res)
	if err := pb.ResultError(rs[len(rs)-1]); err != nil {
		// The submits applied; the claim did not. The call fails so that
		// the claim's refusal is seen; the caller's retry of the submits
		// is answered ALREADY_DONE.
		return nil, nil, fmt.Errorf("claim after %d submits: %w", len(subs), err)
	}
	if err := ctx.Err(); err != nil && len(tasks) > 0 {
		s.ReleaseTasks(tasks) // the caller left as the entry applied
		return nil, nil, err
	}
	res.Results = rs[:len(subs)]
	return res, tasks, nil
}

// admitAfter is admit for a claim that applies after freeing running
// tasks end (fsm.FSM.ClaimViewAfter), in an entry that is written for
// them anyway (claimGate.take). It reserves what it admits; the caller
// releases it.
func (s *Service) admitAfter(ref fsm.QueueRef, want, freeing int) int {
	return s.gate.take(ref, want, func() int {
		pending, due, _ := s.claimable(ref, freeing)
		if due {
			return math.MaxInt
		}
		return pending
	})
}

// claimed is the tasks of the Claim that ends a SubmitThenClaim entry's
// result.
func claimed(res *pb.CommandResult) []*pb.Task {
	rs := res.GetResults()
	if len(rs) == 0 {
		return nil
	}
	return rs[len(rs)-1].GetTasks()
}
