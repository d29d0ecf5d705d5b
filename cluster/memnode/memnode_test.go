package memnode_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dockethq/docket/cluster/memnode"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// The stand-in is a Replica, so the Service runs over it as over a node.
var _ replica.Replica = (*memnode.Node)(nil)

func mustMem(t *testing.T, leader bool) *memnode.Node {
	t.Helper()
	n, err := memnode.New(t.TempDir(), leader, service.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return n
}

func enqueue() *pb.Command {
	return service.EnqueueCommand(&pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Payload: []byte("x")}}})
}

// As leader it applies in place: the FSM holds the task at once.
func Test_LeaderAppliesInPlace(t *testing.T) {
	n := mustMem(t, true)
	res, err := n.Service().Propose(context.Background(), enqueue())
	if err != nil || pb.ResultError(res) != nil {
		t.Fatalf("enqueue: %v %v", res, err)
	}
	if _, err := n.FSM().GetTask(res.GetItems()[0].GetTaskId()); err != nil {
		t.Fatalf("the task is not in the FSM after the answer: %v", err)
	}
	if got := n.Proposed(pb.CommandType_COMMAND_TYPE_ENQUEUE); got != 1 {
		t.Fatalf("Proposed(ENQUEUE) = %d, want 1", got)
	}
}

// As follower it answers as a node does: not the leader, with the
// leader's address, and nothing applied.
func Test_FollowerNamesTheLeader(t *testing.T) {
	n := mustMem(t, false)
	n.SetLeaderAddr("127.0.0.1:7000")
	_, err := n.Apply(context.Background(), enqueue())
	var nl *replica.NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderGRPC != "127.0.0.1:7000" {
		t.Fatalf("follower apply: %v, want a NotLeaderError naming 127.0.0.1:7000", err)
	}
	if n.FSM().AppliedIndex() != 0 {
		t.Fatalf("a follower applied up to %d", n.FSM().AppliedIndex())
	}
}

// Fail makes the next apply give the outcome a real cluster gives under
// a fault, once.
func Test_FailArmsOneApply(t *testing.T) {
	n := mustMem(t, true)
	n.Fail(replica.ErrLeadershipLost)
	if _, err := n.Apply(context.Background(), enqueue()); !errors.Is(err, replica.ErrLeadershipLost) {
		t.Fatalf("armed apply: %v, want ErrLeadershipLost", err)
	}
	if n.FailArmed() {
		t.Fatal("the failure is still armed after one apply")
	}
	if _, err := n.Apply(context.Background(), enqueue()); err != nil {
		t.Fatalf("apply after the failure: %v", err)
	}
}
