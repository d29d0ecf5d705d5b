package check_test

import (
	"context"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_CheckAgreesAcrossCheckpointWindows: voters that write Pebble at
// different moments (no window, windows of 7 entries, of 1,000) hash
// alike at a Check, which ends every voter's window at its index: the
// window changes when Pebble is written, never what (fsm/checkpoint.go).
func Test_CheckAgreesAcrossCheckpointWindows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	windows := map[string]int{"n1": 0, "n2": 7, "n3": 1000}
	nodes := nodetest.ClusterWith(t, 3, func(c *cluster.Config) {
		c.CheckInterval = -1 // checks run by hand below
		c.CheckpointEntries = windows[c.ID]
	})
	l := nodetest.LeaderOf(t, nodes)
	for i := 0; i < 60; i++ {
		if _, err := l.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", "p")); err != nil {
			t.Fatal(err)
		}
	}
	res, err := l.Service().Propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CLAIM,
		Body: &pb.Command_Claim{Claim: &pb.ClaimCmd{Queue: "jobs", Tenant: "default", WorkerId: "w", LeaseNs: int64(time.Minute), MaxTasks: 40}}})
	if err != nil || len(res.GetTasks()) != 40 {
		t.Fatalf("claim: %d tasks, %v", len(res.GetTasks()), err)
	}
	for _, task := range res.GetTasks()[:30] {
		if _, err := l.Service().Propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SUBMIT,
			Body: &pb.Command_Submit{Submit: &pb.SubmitCmd{TaskId: task.GetId(), Fence: task.GetFence(), Outcome: pb.Outcome_OUTCOME_COMPLETED}}}); err != nil {
			t.Fatal(err)
		}
	}
	check, err := l.Internals().Propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CHECK, Body: &pb.Command_Check{Check: &pb.CheckCmd{Urgent: true}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		testwait.For(t, 8*time.Second, n.ID()+"'s hash of the check", func() bool { return n.CheckHash(check.GetIndex()) != "" })
	}
	if a, b, c := nodes[0].CheckHash(check.GetIndex()), nodes[1].CheckHash(check.GetIndex()), nodes[2].CheckHash(check.GetIndex()); a != b || b != c {
		t.Fatalf("voters' hashes differ: %s %s %s", a, b, c)
	}
	for _, n := range nodes[1:] {
		if n.FSM().Checkpoints() == 0 {
			t.Fatalf("%s took no checkpoint: its window never ended", n.ID())
		}
	}
}
