package transport

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_SchedulesOverGRPC: put, replace, list and remove through the API,
// from a follower that forwards the writes.
func Test_SchedulesOverGRPC(t *testing.T) {
	l := mustLeader(t, Config{})
	f := mustFollower(t, l.addr, Config{})
	ctx := testCtx(t)
	s := &pb.Schedule{Name: "nightly", Queue: "reports", Spec: "0 3 * * *", Zone: "Europe/Berlin", Payload: []byte("go")}
	r, err := f.q.PutSchedule(ctx, &pb.PutScheduleRequest{Schedule: s})
	if err != nil || !r.GetCreated() || r.GetSchedule().GetTenant() != pb.DefaultTenant || r.GetSchedule().GetCreatedAt() == 0 {
		t.Fatalf("put: %v %v", r, err)
	}
	s.Spec = "0 4 * * *"
	if r, err := l.q.PutSchedule(ctx, &pb.PutScheduleRequest{Schedule: s}); err != nil || r.GetCreated() || r.GetSchedule().GetSpec() != "0 4 * * *" {
		t.Fatalf("replace: %v %v", r, err)
	}
	ls, err := f.q.ListSchedules(ctx, &pb.ListSchedulesRequest{})
	if err != nil || len(ls.GetSchedules()) != 1 || ls.GetSchedules()[0].GetSpec() != "0 4 * * *" {
		t.Fatalf("list: %v %v", ls, err)
	}
	if r, err := f.q.RemoveSchedule(ctx, &pb.RemoveScheduleRequest{Name: "nightly"}); err != nil || !r.GetRemoved() {
		t.Fatalf("remove: %v %v", r, err)
	}
	if r, err := l.q.RemoveSchedule(ctx, &pb.RemoveScheduleRequest{Name: "nightly"}); err != nil || r.GetRemoved() {
		t.Fatalf("second remove: %v %v", r, err)
	}
	_, err = f.q.PutSchedule(ctx, &pb.PutScheduleRequest{Schedule: &pb.Schedule{Name: "x", Queue: "q", Spec: "0 25 * * *"}})
	wantErr(t, err, codes.InvalidArgument, "", "spec")
	_, err = f.q.PutSchedule(ctx, &pb.PutScheduleRequest{Schedule: &pb.Schedule{Name: "x", Queue: "q", Spec: "@hourly", Zone: "Nowhere/Land"}})
	wantErr(t, err, codes.InvalidArgument, "", "zone")
	_, err = f.q.ListSchedules(ctx, &pb.ListSchedulesRequest{Cursor: "garbage"})
	wantErr(t, err, codes.InvalidArgument, "", "cursor")

	l.node.SetEnabledLevel(fsm.LevelQueueControl)
	_, err = l.q.PutSchedule(ctx, &pb.PutScheduleRequest{Schedule: &pb.Schedule{Name: "x", Queue: "q", Spec: "@hourly"}})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonFeatureDisabled, "")
}

// Test_SchedulesNeedProducer: a producer of a tenant manages that
// tenant's schedules, a reader may only list them, and another tenant's
// producer may do neither.
func Test_SchedulesNeedProducer(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	prodA := mustToken(t, ts, []string{pb.RoleProducer}, []string{"a"}, 0)
	prodB := mustToken(t, ts, []string{pb.RoleProducer}, []string{"b"}, 0)
	readA := mustToken(t, ts, []string{pb.RoleReader, pb.RoleWorker}, []string{"a"}, 0)
	put := &pb.PutScheduleRequest{Schedule: &pb.Schedule{Name: "tick", Tenant: "a", Queue: "q", Spec: "@every 1m"}}
	for _, secret := range []string{prodB.GetSecret(), readA.GetSecret()} {
		_, err := ts.q.PutSchedule(as(ctx, secret), put)
		wantCode(t, "put without producer over a", err, codes.PermissionDenied)
		_, err = ts.q.RemoveSchedule(as(ctx, secret), &pb.RemoveScheduleRequest{Tenant: "a", Name: "tick"})
		wantCode(t, "remove without producer over a", err, codes.PermissionDenied)
	}
	if _, err := ts.q.PutSchedule(as(ctx, prodA.GetSecret()), put); err != nil {
		t.Fatalf("put by a's producer: %v", err)
	}
	if r, err := ts.q.ListSchedules(as(ctx, readA.GetSecret()), &pb.ListSchedulesRequest{Tenant: "a"}); err != nil || len(r.GetSchedules()) != 1 {
		t.Fatalf("list by a's reader: %v %v", r, err)
	}
	_, err := ts.q.ListSchedules(as(ctx, prodB.GetSecret()), &pb.ListSchedulesRequest{Tenant: "a"})
	wantCode(t, "list of a by b's producer", err, codes.PermissionDenied)
	// A producer's request without a tenant is the default tenant's.
	_, err = ts.q.PutSchedule(as(ctx, prodA.GetSecret()), &pb.PutScheduleRequest{Schedule: &pb.Schedule{Name: "t", Queue: "q", Spec: "@hourly"}})
	wantCode(t, "put in the default tenant by a's producer", err, codes.PermissionDenied)
	if r, err := ts.q.RemoveSchedule(as(ctx, prodA.GetSecret()), &pb.RemoveScheduleRequest{Tenant: "a", Name: "tick"}); err != nil || !r.GetRemoved() {
		t.Fatalf("remove by a's producer: %v %v", r, err)
	}
}
