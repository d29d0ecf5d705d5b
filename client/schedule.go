package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/dockethq/docket/proto/docketv1"
)

// Recurring tasks. A put sets a whole schedule and a remove deletes one,
// so both are sent again after ErrOutcomeUnknown: a second put replaces
// the schedule with itself (moving its updated_at, before which no slot
// fires), and a second remove finds nothing.
var (
	opPutSchedule    = op{name: "PutSchedule", repeatable: true}
	opListSchedules  = op{name: "ListSchedules", repeatable: true}
	opRemoveSchedule = op{name: "RemoveSchedule", repeatable: true}
)

// PutSchedule adds a recurring task, or replaces the schedule of that
// tenant and name: from then on the cluster's leader enqueues one task
// per slot of s.Spec (standard 5-field cron or @hourly, @every 5m, ...) in
// s.Zone, with s's payload, priority, max_attempts and retention. Slots
// before the put never fire. It returns the schedule as stored; created
// is false for a replace. It needs the producer (or admin) role over the
// tenant and a cluster whose every server runs a build with feature
// level 8 (ErrFeatureDisabled). A bad spec or zone is a *FieldError.
func (c *Client) PutSchedule(ctx context.Context, s *docketv1.Schedule) (stored *docketv1.Schedule, created bool, err error) {
	req := &docketv1.PutScheduleRequest{Schedule: s}
	_, err = c.invoke(ctx, opPutSchedule, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).PutSchedule(ctx, req, opts...)
		stored, created = r.GetSchedule(), r.GetCreated()
		return err
	})
	return stored, created, err
}

// ListSchedules returns every schedule of tenant ("" is the default
// tenant), by name, following the listing's pages; each carries the last
// slot it fired and how many tasks it enqueued.
func (c *Client) ListSchedules(ctx context.Context, tenant string) ([]*docketv1.Schedule, error) {
	var out []*docketv1.Schedule
	cursor := ""
	for {
		req := &docketv1.ListSchedulesRequest{Tenant: tenant, Cursor: cursor}
		var resp *docketv1.ListSchedulesResponse
		_, err := c.invoke(ctx, opListSchedules, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
			r, err := docketv1.NewQueueClient(cc).ListSchedules(ctx, req, opts...)
			resp = r
			return err
		})
		if err != nil {
			return out, err
		}
		out = append(out, resp.GetSchedules()...)
		if resp.GetNextCursor() == "" {
			return out, nil
		}
		cursor = resp.GetNextCursor()
	}
}

// RemoveSchedule deletes a schedule; the tasks it enqueued stay. removed
// is false when there was no such schedule.
func (c *Client) RemoveSchedule(ctx context.Context, tenant, name string) (removed bool, err error) {
	req := &docketv1.RemoveScheduleRequest{Tenant: tenant, Name: name}
	_, err = c.invoke(ctx, opRemoveSchedule, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		r, err := docketv1.NewQueueClient(cc).RemoveSchedule(ctx, req, opts...)
		removed = r.GetRemoved()
		return err
	})
	return removed, err
}
