package transport

import (
	"context"
	"errors"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// submitThenClaim is a SubmitBatch with a claim: the submits and then a
// Claim without a wait, in one Raft entry on the leader
// (service.Service.SubmitThenClaim). Both halves are admitted here, where
// the call arrived, as a SubmitBatch and a Claim would be; a bad field of
// the claim is named claim.<field>. Its tasks are watched as a Claim's, so
// an answer gRPC cannot send hands them back.
func (q *queueService) submitThenClaim(ctx context.Context, req *pb.SubmitBatchRequest) (*pb.SubmitBatchResponse, error) {
	s := q.s
	if req.GetClaim().GetWaitNs() != 0 {
		return nil, fieldError("claim.wait_ns", "must be 0: a claim with SubmitBatch does not long-poll")
	}
	submits, err := s.admit(ctx, req)
	if err != nil {
		return nil, err
	}
	claim, err := s.admit(ctx, req.GetClaim())
	if err != nil {
		var fe *pb.FieldError
		if errors.As(err, &fe) {
			c := *fe
			c.Field = "claim." + fe.Field
			return nil, &c
		}
		return nil, err
	}
	n := len(req.GetItems())
	resp, err := onLeader(s, ctx, pb.Queue_SubmitBatch_FullMethodName, req, &pb.SubmitBatchResponse{},
		func(ctx context.Context) (*pb.SubmitBatchResponse, error) {
			res, tasks, err := s.svc.SubmitThenClaim(ctx, submits, claim)
			if err == nil {
				err = pb.ResultError(res)
			}
			if err != nil {
				return nil, err
			}
			out, err := submitBatchAnswer(res, n)
			if err != nil {
				s.svc.ReleaseTasks(tasks)
				return nil, err
			}
			out.Tasks = tasks
			return out, nil
		})
	if err == nil {
		watchClaim(ctx, resp.GetTasks()) // for claimWatch, if the send fails
	}
	return resp, err
}
