package transport

import (
	"context"
	"errors"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// PutSchedule adds or replaces a schedule and answers it as stored, read
// back on the leader that applied it. created is false for a replace:
// a replace keeps the schedule's first created_at and moves updated_at.
func (q *queueService) PutSchedule(ctx context.Context, req *pb.PutScheduleRequest) (*pb.PutScheduleResponse, error) {
	cmd, err := q.s.admit(ctx, req)
	if err != nil {
		return nil, err
	}
	put := cmd.GetPutSchedule().GetSchedule() // the tenant defaulted
	return run(q.s, ctx, pb.Queue_PutSchedule_FullMethodName, req, &pb.PutScheduleResponse{}, cmd,
		func(res *pb.CommandResult) (*pb.PutScheduleResponse, error) {
			it, err := oneItem(res)
			if err != nil {
				return nil, err
			}
			if err := pb.ItemError(it); err != nil {
				return nil, err
			}
			s, err := q.s.svc.Schedule(ctx, put.GetTenant(), put.GetName(), service.Stale)
			if err != nil {
				return nil, err
			}
			return &pb.PutScheduleResponse{Created: s.GetCreatedAt() == res.GetNow(), Schedule: s}, nil
		})
}

// ListSchedules pages through a tenant's schedules by name; linearizable
// unless the request says stale.
func (q *queueService) ListSchedules(ctx context.Context, req *pb.ListSchedulesRequest) (*pb.ListSchedulesResponse, error) {
	return read(q.s, ctx, pb.Queue_ListSchedules_FullMethodName, req, &pb.ListSchedulesResponse{}, req.GetStale(),
		func(c service.Consistency) (*pb.ListSchedulesResponse, error) {
			out, next, err := q.s.svc.ListSchedules(ctx, req, c)
			if err != nil {
				return nil, err
			}
			return &pb.ListSchedulesResponse{Schedules: out, NextCursor: next}, nil
		})
}

// RemoveSchedule answers removed=false when there was no such schedule:
// repeating it is safe.
func (q *queueService) RemoveSchedule(ctx context.Context, req *pb.RemoveScheduleRequest) (*pb.RemoveScheduleResponse, error) {
	return write(q.s, ctx, pb.Queue_RemoveSchedule_FullMethodName, req, &pb.RemoveScheduleResponse{},
		func(res *pb.CommandResult) (*pb.RemoveScheduleResponse, error) {
			it, err := oneItem(res)
			if err != nil {
				return nil, err
			}
			if err := pb.ItemError(it); errors.Is(err, pb.ErrNotFound) {
				return &pb.RemoveScheduleResponse{}, nil
			} else if err != nil {
				return nil, err
			}
			return &pb.RemoveScheduleResponse{Removed: true}, nil
		})
}
