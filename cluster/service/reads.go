package service

import (
	"context"
	"fmt"
	"strings"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Consistency is what a read promises about the state it sees.
type Consistency int

const (
	// Linearizable reads see every write acknowledged before they began:
	// the leader confirms it still leads with a quorum and waits until
	// its replica has applied that far (ReadBarrier). On a follower the
	// read fails with *replica.NotLeaderError; the API layer forwards it first.
	Linearizable Consistency = iota
	// Stale reads answer from this node's replica at once. They may lag
	// the leader, and never go back in time on one node.
	Stale
)

func (s *Service) readAt(ctx context.Context, c Consistency) error {
	if c == Stale {
		return nil
	}
	return s.r.ReadBarrier(ctx)
}

// GetTask reads one task and the applied index the answer reflects, both
// from one Pebble snapshot; ErrNotFound (with the index) when absent.
func (s *Service) GetTask(ctx context.Context, id string, c Consistency) (*pb.Task, uint64, error) {
	if id == "" {
		return nil, 0, &pb.FieldError{Field: "task_id", Reason: "required"}
	}
	if err := s.readAt(ctx, c); err != nil {
		return nil, 0, err
	}
	return s.r.FSM().GetTaskAt(id)
}

// Stats pages through the per-queue counts of queue and tenant (all when
// empty) from after cursor, and returns the next page's cursor.
func (s *Service) Stats(ctx context.Context, queue, tenant, cursor string, c Consistency) ([]*pb.QueueStats, string, error) {
	if err := s.readAt(ctx, c); err != nil {
		return nil, "", err
	}
	// A bad cursor is the FSM's FieldError on "cursor" (storage decodes
	// it; fsm/cursor.go names the field).
	st, next, err := s.r.FSM().StatsPage(queue, tenant, cursor)
	if err != nil {
		return nil, "", fmt.Errorf("stats: %w", err)
	}
	return st, next, nil
}

// CheckListDead fills a ListDead request's default tenant and checks its
// names, so the node that receives it refuses a bad one. The cursor is
// checked where it is decoded, against the range it pages (storage).
func CheckListDead(req *pb.ListDeadRequest) error {
	if req.GetTenant() == "" {
		req.Tenant = pb.DefaultTenant
	}
	queue, tenant := req.GetQueue(), req.GetTenant()
	if strings.Contains(queue, "/") || strings.Contains(tenant, "/") {
		return &pb.FieldError{Field: "queue", Reason: "queue and tenant may not contain '/'"}
	}
	return nil
}

// ListDead pages through a queue's dead letters, oldest id first, or with
// no queue those of every queue of the tenant, queue by queue: up to
// req.limit (default 100, at most MaxBatch, what one RequeueDead replays).
func (s *Service) ListDead(ctx context.Context, req *pb.ListDeadRequest, c Consistency) ([]*pb.Task, string, error) {
	if err := CheckListDead(req); err != nil {
		return nil, "", err
	}
	if req.GetQueue() == "" {
		return s.listTenantDead(ctx, req, c)
	}
	return s.list(ctx, req.GetQueue(), req.GetTenant(), pb.TaskState_TASK_STATE_DEAD, req.GetCursor(), req.GetLimit(), c)
}

// CheckListTasks fills a ListTasks request's default tenant and checks its
// names and state, so the node that receives it refuses a bad one.
func CheckListTasks(req *pb.ListTasksRequest) error {
	if req.GetQueue() == "" {
		return &pb.FieldError{Field: "queue", Reason: "required"}
	}
	if err := CheckListDead(&pb.ListDeadRequest{Queue: req.GetQueue(), Tenant: req.GetTenant()}); err != nil {
		return err
	}
	if req.GetTenant() == "" {
		req.Tenant = pb.DefaultTenant
	}
	switch req.GetState() {
	case pb.TaskState_TASK_STATE_PENDING, pb.TaskState_TASK_STATE_DELAYED,
		pb.TaskState_TASK_STATE_RUNNING, pb.TaskState_TASK_STATE_DEAD, pb.TaskState_TASK_STATE_WAITING:
		return nil
	}
	return &pb.FieldError{Field: "state", Reason: "pending, delayed, running, dead or waiting (the states a queue indexes)"}
}

// ListTasks pages through a queue's tasks in one state: up to req.limit
// (default 100, at most MaxBatch). The tasks keep their fences; the API
// layer drops them.
func (s *Service) ListTasks(ctx context.Context, req *pb.ListTasksRequest, c Consistency) ([]*pb.Task, string, error) {
	if err := CheckListTasks(req); err != nil {
		return nil, "", err
	}
	return s.list(ctx, req.GetQueue(), req.GetTenant(), req.GetState(), req.GetCursor(), req.GetLimit(), c)
}

// list pages through a queue's tasks in one state at consistency c: up to
// limit (0: the default; at most MaxBatch).
func (s *Service) list(ctx context.Context, queue, tenant string, state pb.TaskState, cursor string, limit uint32, c Consistency) ([]*pb.Task, string, error) {
	n := int(limit)
	if n <= 0 {
		n = pb.DefaultListLimit
	}
	n = min(n, pb.MaxBatch)
	if err := s.readAt(ctx, c); err != nil {
		return nil, "", err
	}
	tasks, next, err := s.r.FSM().ListTasks(queue, tenant, state, cursor, n)
	if err != nil {
		return nil, "", fmt.Errorf("list %s tasks: %w", state, err)
	}
	return tasks, next, nil
}
