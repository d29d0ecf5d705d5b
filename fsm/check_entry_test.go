package fsm

import (
	"testing"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func checkEntryCmd(now int64) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CHECK, Now: now, Body: &pb.Command_Check{Check: &pb.CheckCmd{}}}
}

func checkResultCmd(now int64, index uint64, hash string) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CHECK_RESULT, Now: now, Body: &pb.Command_CheckResult{
		CheckResult: &pb.CheckResultCmd{CheckIndex: index, Hash: hash, Agreeing: 1, Voters: 1}}}
}

// A Check in the middle of an apply batch is hashed at exactly its own
// index, not at the end of the batch: one replica applying entries one by
// one and another applying them in one batch report the same hash, which
// is the keyspace hash right after the Check.
func Test_CheckViewIsAtCheckIndex(t *testing.T) {
	logs := []*raft.Log{
		entry(t, 1, enqueueCmd(at(0), nt("q", "t", 1))),
		entry(t, 2, checkEntryCmd(at(1))),
		entry(t, 3, enqueueCmd(at(2), nt("q", "t", 2))),
	}
	var events []CheckEvent
	collect := func(ev CheckEvent) { events = append(events, ev) }

	single := newHarness(t)
	single.f.SetCheckObserver(collect)
	single.f.Apply(logs[0])
	single.f.Apply(logs[1])
	wantHash := mustHash(t, single.f) // the keyspace right after the Check
	single.f.Apply(logs[2])

	batched := newHarness(t)
	batched.f.SetCheckObserver(collect)
	batched.f.ApplyBatch(logs)
	if batched.f.AppliedIndex() != 3 {
		t.Fatalf("batched applied %d, want 3", batched.f.AppliedIndex())
	}
	if len(events) != 2 {
		t.Fatalf("%d check events, want 2", len(events))
	}
	for i, ev := range events {
		if ev.Index != 2 || ev.View == nil || ev.View.Index() != 2 {
			t.Fatalf("event %d: index %d view %v, want a view at 2", i, ev.Index, ev.View)
		}
		got, err := ev.View.Hash()
		ev.View.Release()
		if err != nil {
			t.Fatal(err)
		}
		if got != wantHash {
			t.Fatalf("event %d: hash %s, want %s (the keyspace at the check)", i, got, wantHash)
		}
	}
	if mustHash(t, single.f) != mustHash(t, batched.f) {
		t.Fatal("replicas differ after the batch")
	}
}

// A CheckResult reaches the observer only when its check index lies
// before it; otherwise every replica rejects it alike.
func Test_CheckResultAcceptedOnlyForEarlierIndex(t *testing.T) {
	h := newHarness(t)
	var got []CheckEvent
	h.f.SetCheckObserver(func(ev CheckEvent) {
		if ev.View != nil {
			ev.View.Release()
		}
		got = append(got, ev)
	})
	h.apply(checkEntryCmd(at(0)))
	hash := mustHash(t, h.f)
	if res := h.apply(checkResultCmd(at(1), 5, hash)); res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT {
		t.Fatalf("result for a later index: %v, want rejected", res)
	}
	if res := h.apply(checkResultCmd(at(1), 1, "xyz")); res.GetErrorCode() != pb.Code_CODE_INVALID_ARGUMENT {
		t.Fatalf("result with a bad hash: %v, want rejected", res)
	}
	if res := h.apply(checkResultCmd(at(1), 1, hash)); res.GetErrorCode() != pb.Code_CODE_OK {
		t.Fatalf("result for the check: %v", res)
	}
	if len(got) != 2 || got[1].Result == nil || got[1].Result.GetCheckIndex() != 1 || got[1].Index != 4 {
		t.Fatalf("events %v, want the view at 1 and the result at 4", got)
	}
}
