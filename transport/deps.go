package transport

import (
	"context"
	"errors"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// ParentResults reads a task and then each of its parents. The child is
// read at the consistency asked for; the parents after it from the same
// replica, which has then applied at least as much, so a parent the child
// saw completed is seen completed. A parent purged since reads as state
// UNSPECIFIED: its result is gone, which the caller should know rather
// than fail on.
func (q *queueService) ParentResults(ctx context.Context, req *pb.ParentResultsRequest) (*pb.ParentResultsResponse, error) {
	if req.GetTaskId() == "" {
		return nil, fieldError("task_id", "required")
	}
	return read(q.s, ctx, pb.Queue_ParentResults_FullMethodName, req, &pb.ParentResultsResponse{}, req.GetAllowStale(),
		func(c service.Consistency) (*pb.ParentResultsResponse, error) {
			child, applied, err := q.s.svc.GetTask(ctx, req.GetTaskId(), c)
			if err == nil {
				err = service.OwnTask(child, req.GetTenant())
			}
			if err != nil {
				return nil, err
			}
			out := &pb.ParentResultsResponse{AppliedIndex: applied}
			for _, id := range child.GetParents() {
				p, _, err := q.s.svc.GetTask(ctx, id, service.Stale)
				if err == nil {
					err = service.OwnTask(p, child.GetTenant())
				}
				switch {
				case errors.Is(err, pb.ErrNotFound):
					out.Parents = append(out.Parents, &pb.ParentResult{TaskId: id})
				case err != nil:
					return nil, err
				default:
					out.Parents = append(out.Parents, &pb.ParentResult{TaskId: id, State: p.GetState(),
						Outcome: p.GetOutcome(), Result: p.GetResult(), LastError: p.GetLastError()})
				}
			}
			return out, nil
		})
}
