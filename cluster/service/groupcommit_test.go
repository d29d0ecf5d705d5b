package service

import (
	"fmt"
	"testing"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func hbCall(ids ...string) *coCall {
	items := make([]*pb.HeartbeatItem, len(ids))
	for i, id := range ids {
		items[i] = &pb.HeartbeatItem{TaskId: id, Fence: 1}
	}
	return &coCall{cmd: HeartbeatCommand(items), reply: make(chan coReply, 1)}
}

// Adjacent heartbeats merge into one command, up to pb.MaxBatch items;
// nothing moves past another command; each caller gets its own items back.
func Test_MergeHeartbeats(t *testing.T) {
	enq := &coCall{cmd: &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE}, reply: make(chan coReply, 1)}
	a, b, c := hbCall("a1", "a2"), hbCall("b1"), hbCall("c1")
	groups := mergeHeartbeats([]*coCall{a, b, enq, c})
	if len(groups) != 3 || len(groups[0].calls) != 2 || groups[1].cmd != enq.cmd || len(groups[2].calls) != 1 {
		t.Fatalf("groups %+v; want [a+b] [enqueue] [c]", groups)
	}
	if n := len(groups[0].cmd.GetHeartbeat().GetItems()); n != 3 {
		t.Fatalf("merged command has %d items, want 3", n)
	}
	if n := len(a.cmd.GetHeartbeat().GetItems()); n != 2 {
		t.Fatalf("the first caller's own command changed to %d items", n)
	}

	res := &pb.CommandResult{Index: 7, Items: []*pb.ItemResult{{TaskId: "a1"}, {TaskId: "a2"}, {TaskId: "b1"}}}
	groups[0].deliver(res, nil)
	ra, rb := <-a.reply, <-b.reply
	if ids := fmt.Sprintln(len(ra.res.GetItems()), ra.res.GetItems()[1].GetTaskId(), len(rb.res.GetItems()), rb.res.GetItems()[0].GetTaskId()); ids != "2 a2 1 b1\n" {
		t.Fatalf("split answers %s; want each caller's own items", ids)
	}
	if ra.res.GetIndex() != 7 || rb.res.GetIndex() != 7 {
		t.Fatal("split answers lost the entry's index")
	}

	// A run longer than one command may carry splits.
	var run []*coCall
	for i := range 3 {
		ids := make([]string, pb.MaxBatch/2)
		for j := range ids {
			ids[j] = fmt.Sprint(i, "-", j)
		}
		run = append(run, hbCall(ids...))
	}
	if g := mergeHeartbeats(run); len(g) != 2 || len(g[0].calls) != 2 || len(g[1].calls) != 1 {
		t.Fatalf("%d groups for 1.5 commands' worth of items, want 2 (2 calls, 1 call)", len(g))
	}
}
