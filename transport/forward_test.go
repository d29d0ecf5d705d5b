package transport

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func Test_ForwardFromFollower(t *testing.T) {
	leader := mustLeader(t, Config{})
	follower := mustFollower(t, leader.addr, Config{})
	ctx := testCtx(t)

	// A write through the follower lands on the leader, and the answer
	// names the leader in header and trailer.
	var hdr, tr metadata.MD
	resp, err := follower.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Payload: []byte("x")}}},
		grpc.Header(&hdr), grpc.Trailer(&tr))
	if err != nil {
		t.Fatalf("enqueue via follower: %v", err)
	}
	id := resp.GetItems()[0].GetTaskId()
	for name, md := range map[string]metadata.MD{"header": hdr, "trailer": tr} {
		if got := md.Get(pb.MetadataLeader); len(got) != 1 || got[0] != leader.addr {
			t.Fatalf("%s %s = %v, want [%s]", name, pb.MetadataLeader, got, leader.addr)
		}
	}
	if got, err := leader.node.FSM().GetTask(id); err != nil || got.GetTenant() != "default" {
		t.Fatalf("leader's task %v, err %v; want tenant %q", got, err, "default")
	}

	// The fake does not replicate: the follower's own replica lacks the
	// task, so a stale read misses it and a linearizable one (forwarded)
	// finds it.
	if _, err := follower.q.GetTask(ctx, &pb.GetTaskRequest{TaskId: id, AllowStale: true}); err == nil {
		t.Fatal("stale read on the follower found a task it never applied")
	}
	got, err := follower.q.GetTask(ctx, &pb.GetTaskRequest{TaskId: id})
	if err != nil || got.GetTask().GetId() != id {
		t.Fatalf("linearizable read via follower: %v, %v", got, err)
	}

	// Worker calls go through too, and each is forwarded once.
	task := mustClaim(t, follower.q, "q", 1)[0]
	hb, err := follower.q.Heartbeat(ctx, &pb.HeartbeatRequest{Items: []*pb.HeartbeatItem{{TaskId: task.GetId(), Fence: task.GetFence()}}})
	if err != nil || hb.GetItems()[0].GetCode() != pb.Code_CODE_OK {
		t.Fatalf("heartbeat via follower: %v, %v", hb, err)
	}
	_, err = follower.q.Submit(ctx, &pb.SubmitRequest{TaskId: task.GetId(), Fence: task.GetFence() + 1, Outcome: pb.Outcome_OUTCOME_COMPLETED})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonStaleFence, "") // the leader's error, relayed as is
	wr, err := follower.q.WaitResult(ctx, &pb.WaitResultRequest{TaskId: task.GetId()})
	if err != nil || wr.GetDone() || wr.GetTask().GetState() != pb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("wait result via follower: %v, %v", wr, err)
	}
	if n := leader.node.Proposed(pb.CommandType_COMMAND_TYPE_HEARTBEAT); n != 1 {
		t.Fatalf("%d heartbeat commands, want 1", n)
	}

	// Cluster operations run on the leader as well.
	tl, err := follower.c.TransferLeadership(ctx, &pb.TransferLeadershipRequest{ToId: "n3"})
	if err != nil || tl.GetLeaderId() != "to-n3" {
		t.Fatalf("transfer via follower: %v, %v", tl, err)
	}
	if _, err := follower.c.RemoveServer(ctx, &pb.RemoveServerRequest{Id: "n9"}); err != nil || leader.node.Removed() != "n9" {
		t.Fatalf("remove server via follower: %v", err)
	}
	st, err := follower.c.Status(ctx, &pb.StatusRequest{})
	if err != nil || st.GetState() != "Follower" {
		t.Fatalf("status answers locally: %v, %v", st, err)
	}
}

// Two followers that name each other as leader (a stale view during an
// election) must not bounce a request between them.
func Test_ForwardedAtMostOnce(t *testing.T) {
	a := mustFollower(t, "", Config{})
	b := mustFollower(t, a.addr, Config{})
	a.node.SetLeaderAddr(b.addr)

	var tr metadata.MD
	_, err := a.q.Enqueue(testCtx(t), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}}, grpc.Trailer(&tr))
	wantErr(t, err, codes.Unavailable, pb.ReasonNotLeader, "")
	if got := tr.Get(pb.MetadataLeader); len(got) != 1 || got[0] != b.addr {
		t.Fatalf("trailer %s = %v, want [%s]", pb.MetadataLeader, got, b.addr)
	}
}

// A node that loses leadership between its check and its proposal forwards
// the call to the leader its not-leader error names.
func Test_ForwardWhenLeadershipMoves(t *testing.T) {
	leader := mustLeader(t, Config{})
	deposed := mustLeader(t, Config{})
	deposed.node.Fail(&notLeaderError{LeaderID: "n1", LeaderGRPC: leader.addr})

	resp, err := deposed.q.Enqueue(testCtx(t), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}})
	if err != nil {
		t.Fatalf("enqueue on a deposed leader: %v", err)
	}
	if _, err := leader.node.FSM().GetTask(resp.GetItems()[0].GetTaskId()); err != nil {
		t.Fatalf("task not on the new leader: %v", err)
	}
}
