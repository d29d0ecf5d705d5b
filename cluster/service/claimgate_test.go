package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_ClaimWithoutWaitWaitsOutClaimsInFlight: a claim in flight that has
// applied but not yet released its reservation makes the gate's count of
// free tasks low. A claim without a wait then waits for the release and
// takes the task still pending, instead of answering empty: the items of
// one ClaimBatch, which all claim at once, met this every time.
func Test_ClaimWithoutWaitWaitsOutClaimsInFlight(t *testing.T) {
	m := mustMemNode(t, true)
	s := m.Service()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if res, err := m.Apply(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE,
		Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: []*pb.NewTask{
			{Queue: "q", Tenant: "default"}, {Queue: "q", Tenant: "default"},
		}}}}); err != nil || res.GetErrorCode() != pb.Code_CODE_OK {
		t.Fatalf("enqueue: %v, %v", res, err)
	}
	ref := fsm.QueueRef{Queue: "q", Tenant: "default"}
	// The claim in flight: reserved one task, applied, not yet released.
	if n := service.GateReserve(s, ref, 1, func() int { return 2 }); n != 1 {
		t.Fatalf("reserved %d, want 1", n)
	}
	res, err := m.Apply(ctx, s.ClaimCommand(&pb.ClaimRequest{Queue: "q", WorkerId: "first", MaxTasks: 1}))
	if err != nil || len(res.GetTasks()) != 1 {
		t.Fatalf("the claim in flight: %v, %v", res, err)
	}

	type result struct {
		tasks []*pb.Task
		err   error
	}
	got := make(chan result, 1)
	go func() {
		tasks, err := s.Claim(ctx, s.ClaimCommand(&pb.ClaimRequest{Queue: "q", WorkerId: "second", MaxTasks: 1}), 0)
		got <- result{tasks, err}
	}()
	waiting := func() bool {
		return service.GateWaiting(s, ref)
	}
	testwait.For(t, 2*time.Second, "the claim to wait for the claim in flight", func() bool {
		select {
		case r := <-got:
			t.Fatalf("the claim answered %d tasks (%v) before the claim in flight released", len(r.tasks), r.err)
		default:
		}
		return waiting()
	})
	service.GateRelease(s, ref, 1)
	if r := <-got; r.err != nil || len(r.tasks) != 1 || r.tasks[0].GetWorkerId() != "second" {
		t.Fatalf("claim after the release: %v, %v; want the pending task", r.tasks, r.err)
	}
}

// Test_GateTakeIgnoresReservationsAndCounts: a claim riding on submits
// takes what the replica shows, whatever other claims reserved (its
// submits free the slots their reservations stand on), and its own take
// counts against the claims that propose entries of their own.
func Test_GateTakeIgnoresReservationsAndCounts(t *testing.T) {
	s := mustMemNode(t, true).Service()
	ref := fsm.QueueRef{Queue: "q", Tenant: "default"}
	two := func() int { return 2 }
	if n := service.GateReserve(s, ref, 2, two); n != 2 {
		t.Fatalf("reserved %d, want 2", n)
	}
	if n := service.GateTake(s, ref, 3, two); n != 2 {
		t.Fatalf("a ride took %d with 2 reserved by others, want the 2 shown", n)
	}
	service.GateRelease(s, ref, 2)
	if n := service.GateReserve(s, ref, 1, two); n != 0 {
		t.Fatalf("a claim reserved %d while the ride holds both tasks, want 0", n)
	}
	service.GateRelease(s, ref, 2)
	if n := service.GateReserve(s, ref, 1, two); n != 1 {
		t.Fatalf("a claim reserved %d once the ride released, want 1", n)
	}
	if n := service.GateTake(s, ref, 1, func() int { return 0 }); n != 0 {
		t.Fatalf("a ride took %d of nothing", n)
	}
}
