package service

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// PutScheduleCommand builds the put of s; an empty tenant is the default
// tenant, and the fields the FSM owns are cleared (it would ignore them),
// so that a schedule read from a listing can be put back as it is.
func PutScheduleCommand(s *pb.Schedule) *pb.Command {
	c := &pb.Schedule{}
	if s != nil {
		c = proto.Clone(s).(*pb.Schedule)
	}
	if c.Tenant == "" {
		c.Tenant = pb.DefaultTenant
	}
	c.LastSlot, c.CreatedAt, c.UpdatedAt, c.Fired, c.LastTaskId = 0, 0, 0, 0, ""
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_PUT_SCHEDULE, Body: &pb.Command_PutSchedule{
		PutSchedule: &pb.PutScheduleCmd{Schedule: c}}}
}

// RemoveScheduleCommand builds the removal of one schedule; an empty
// tenant is the default tenant.
func RemoveScheduleCommand(tenant, name string) *pb.Command {
	if tenant == "" {
		tenant = pb.DefaultTenant
	}
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_REMOVE_SCHEDULE, Body: &pb.Command_RemoveSchedule{
		RemoveSchedule: &pb.RemoveScheduleCmd{Tenant: tenant, Name: name}}}
}

// FireScheduleCommand builds the fire of one slot of a schedule.
func FireScheduleCommand(tenant, name string, slot int64) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_FIRE_SCHEDULE, Body: &pb.Command_FireSchedule{
		FireSchedule: &pb.FireScheduleCmd{Tenant: tenant, Name: name, Slot: slot}}}
}

// ListSchedules pages through one tenant's schedules by name at
// consistency c; an empty tenant is the default tenant.
func (s *Service) ListSchedules(ctx context.Context, req *pb.ListSchedulesRequest, c Consistency) ([]*pb.Schedule, string, error) {
	if req.GetTenant() == "" {
		req.Tenant = pb.DefaultTenant
	}
	if strings.Contains(req.GetTenant(), "/") {
		return nil, "", &pb.FieldError{Field: "tenant", Reason: "may not contain '/'"}
	}
	if err := s.readAt(ctx, c); err != nil {
		return nil, "", err
	}
	out, next, err := s.r.FSM().ListSchedules(req.GetTenant(), req.GetCursor())
	if err != nil {
		return nil, "", fmt.Errorf("list schedules of %s: %w", req.GetTenant(), err)
	}
	return out, next, nil
}

// Schedule reads one schedule at consistency c; an error wrapping
// ErrNotFound when there is none.
func (s *Service) Schedule(ctx context.Context, tenant, name string, c Consistency) (*pb.Schedule, error) {
	if tenant == "" {
		tenant = pb.DefaultTenant
	}
	if err := s.readAt(ctx, c); err != nil {
		return nil, err
	}
	return s.r.FSM().Schedule(tenant, name)
}
