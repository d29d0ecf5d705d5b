package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// maxClaimBatchTasks bounds the sum of one ClaimBatch's max_tasks, so that
// one call claims no more than the largest single Claim may.
const maxClaimBatchTasks = pb.MaxBatch

// ClaimBatch runs each item as the ordinary Claim command, all at once, so
// that the node's group commit folds them into shared entries, and answers
// each item with its own tasks, in order. It runs on the leader (a
// follower forwards the whole call) and never waits: an item's wait_ns
// must be 0, so a ClaimBatch takes no long-poll slot.
func (q *queueService) ClaimBatch(ctx context.Context, req *pb.ClaimBatchRequest) (*pb.ClaimBatchResponse, error) {
	s := q.s
	cmds, err := s.claimBatchCommands(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, err := onLeader(s, ctx, pb.Queue_ClaimBatch_FullMethodName, req, &pb.ClaimBatchResponse{},
		func(ctx context.Context) (*pb.ClaimBatchResponse, error) {
			got, err := s.claimAll(ctx, cmds)
			if err != nil {
				return nil, err
			}
			resp, _, kept := fitClaimAnswer(got, s.answerLimit())
			s.svc.ReleaseTasks(kept)
			return resp, nil
		})
	if err == nil {
		var sent []*pb.Task
		for _, it := range resp.GetItems() {
			sent = append(sent, it.GetTasks()...)
		}
		watchClaim(ctx, sent) // for claimWatch, if the send fails
	}
	return resp, err
}

// claimBatchCommands checks req and builds one Claim command per item,
// with Claim's defaults. A bad item is named by its place (items[3].queue).
func (s *Server) claimBatchCommands(ctx context.Context, req *pb.ClaimBatchRequest) ([]*pb.Command, error) {
	items := req.GetItems()
	if n := len(items); n == 0 || n > pb.MaxBatch {
		return nil, fieldError("items", fmt.Sprintf("%d not in 1..%d", n, pb.MaxBatch))
	}
	cmds := make([]*pb.Command, len(items))
	total := 0
	for i, it := range items {
		if it == nil {
			return nil, fieldError(fmt.Sprintf("items[%d]", i), "missing")
		}
		if it.GetWaitNs() != 0 {
			return nil, fieldError(fmt.Sprintf("items[%d].wait_ns", i), "must be 0: ClaimBatch does not long-poll")
		}
		cmd, err := s.admit(ctx, it)
		if err != nil {
			var fe *pb.FieldError
			if errors.As(err, &fe) {
				return nil, fe.InList("items", i)
			}
			return nil, err
		}
		total += int(cmd.GetClaim().GetMaxTasks())
		cmds[i] = cmd
	}
	if total > maxClaimBatchTasks {
		return nil, fieldError("items", fmt.Sprintf("max_tasks add up to %d, over %d", total, maxClaimBatchTasks))
	}
	return cmds, nil
}

// claimAll runs every command as its own Claim without a wait, all at
// once, and returns each one's tasks. If any fails, it releases what the
// others claimed and returns the first error by place: the caller gets
// nothing, as from a failed Claim. A not-leader error after some items
// claimed becomes ErrLeadershipLost, since onLeader would forward the call
// as if nothing had been done.
func (s *Server) claimAll(ctx context.Context, cmds []*pb.Command) ([][]*pb.Task, error) {
	got := make([][]*pb.Task, len(cmds))
	errs := make([]error, len(cmds))
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = s.svc.Claim(ctx, cmd, 0)
		}()
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		if err != nil {
			first = err
			break
		}
	}
	if first == nil {
		return got, nil
	}
	var claimed []*pb.Task
	for _, tasks := range got {
		claimed = append(claimed, tasks...)
	}
	s.svc.ReleaseTasks(claimed)
	if len(claimed) > 0 && errors.Is(first, errNotLeader) {
		return nil, fmt.Errorf("%w: leadership moved after %d tasks of the batch were claimed (released): %w",
			errLeadershipLost, len(claimed), first)
	}
	return nil, first
}

// fitClaimAnswer builds a ClaimBatch answer of at most limit bytes. Each
// item's tasks are bounded (fsm.AnswerBudget, or one larger task), but a
// thousand of them are not: from the first item that would not fit to the
// last, items are answered empty, and their tasks are returned as kept,
// for the caller to release. Whole items go, so no caller gets part of its
// claim; and a prefix stays, so earlier callers are served first. sent are
// the tasks the answer carries.
func fitClaimAnswer(got [][]*pb.Task, limit int) (resp *pb.ClaimBatchResponse, sent, kept []*pb.Task) {
	resp = &pb.ClaimBatchResponse{Items: make([]*pb.ClaimResponse, len(got))}
	empty := protowire.SizeTag(1) + protowire.SizeBytes(0) // an empty item
	size := empty * len(got)
	full := false
	for i, tasks := range got {
		item := &pb.ClaimResponse{}
		resp.Items[i] = item
		if len(tasks) == 0 {
			continue
		}
		if !full {
			n, _ := tasksSize(tasks, nil)
			extra := protowire.SizeTag(1) + protowire.SizeBytes(n) - empty
			if size+extra <= limit {
				size += extra
				item.Tasks = tasks
				sent = append(sent, tasks...)
				continue
			}
			full = true
		}
		kept = append(kept, tasks...)
	}
	return resp, sent, kept
}

// answerLimit is the most bytes a ClaimBatch answer may take:
// MaxAnswerBytes, the server's send limit, unless a test lowers it.
func (s *Server) answerLimit() int {
	if s.cfg.answerLimit > 0 {
		return s.cfg.answerLimit
	}
	return MaxAnswerBytes
}
