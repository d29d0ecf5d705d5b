package fsm

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// sameKeyspaceHoweverBatched applies cmds one entry per ApplyBatch to one
// FSM and all in one ApplyBatch to another: Raft groups entries
// differently on every node and on replay, so both must hash the same.
func sameKeyspaceHoweverBatched(t *testing.T, cmds ...*pb.Command) {
	t.Helper()
	logs := make([]*raft.Log, len(cmds))
	for i, c := range cmds {
		logs[i] = entry(t, uint64(i+1), c)
	}
	single, batched := newHarness(t), newHarness(t)
	for _, l := range logs {
		single.f.ApplyBatch([]*raft.Log{l})
	}
	batched.f.ApplyBatch(logs)
	if a, b := mustHash(t, single.f), mustHash(t, batched.f); a != b {
		t.Fatalf("replicas diverge: one entry per batch %s, one batch %s", a, b)
	}
	checkKeyspace(t, single.f)
}

// Test_EmptyQueueDropIsPerCommand: whether a command leaves a queue's
// catalog record depends on that command, not on what earlier commands
// of the same apply batch wrote. Empty-queue removal looked at the
// batch-wide dirty mark, so a pause and a resume in one batch dropped the
// record and applied one by one kept it for good.
func Test_EmptyQueueDropIsPerCommand(t *testing.T) {
	t.Run("pause then resume", func(t *testing.T) {
		l := latchCmd(FeatureLevel)
		l.Now = t0
		sameKeyspaceHoweverBatched(t, l, setPausedCmd(at(1), "q", "tn", true), setPausedCmd(at(2), "q", "tn", false))
	})
	t.Run("latch after a purge emptied the queue", func(t *testing.T) {
		task := nt("q", "tn", 0)
		task.RetentionNs = int64(time.Second)
		l12 := latchCmd(LevelRetries)
		l12.Now = at(10 * time.Second)
		sameKeyspaceHoweverBatched(t, latchCmd(LevelDependencies), enqueueCmd(at(1), task),
			cancelCmd(at(2), TaskID(2, 0)), purgeCmd(at(9*time.Second), 10), l12)
	})
}

// Test_NewFieldsIgnoredBeforeTheirLevel: a field this build knows and an
// older one does not (an older leader passes it through as an unknown
// field) must be ignored below its level, bad value or not, as the older
// replicas ignore it; refusing the Enqueue here while they store it
// diverges.
func Test_NewFieldsIgnoredBeforeTheirLevel(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*pb.NewTask)
	}{
		{"retry policy out of range", func(nt *pb.NewTask) { nt.Retry = &pb.RetryPolicy{BaseNs: 1e9, JitterPercent: 200} }},
		{"negative timeout", func(nt *pb.NewTask) { nt.TimeoutNs = -1 }},
		{"self reference", func(nt *pb.NewTask) { nt.AfterIndex = []uint32{0} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply(latchCmd(LevelQueueControl))
			task := nt("q", "tn", 0)
			tc.set(task)
			res := h.apply(enqueueCmd(at(time.Second), task))
			if res.GetErrorCode() != 0 || len(res.GetItems()) != 1 || res.GetItems()[0].GetCode() != pb.Code_CODE_OK {
				t.Fatalf("at level 7: %v %q, want the task enqueued as a level-7 build would", res.GetErrorCode(), res.GetErrorDetail())
			}
			checkKeyspace(t, h.f)
		})
	}
}

// Test_ReapPastDeadlineIsATimeout: a claim whose lease and execution
// deadline have both passed ends by the timeout's rule whichever of the
// leader's Reap and TimeOut lands first.
func Test_ReapPastDeadlineIsATimeout(t *testing.T) {
	var states []pb.TaskState
	for _, reapFirst := range []bool{true, false} {
		h := newHarness(t)
		h.apply(latchCmd(FeatureLevel))
		task := nt("q", "tn", 0)
		task.TimeoutNs = int64(5 * time.Second)
		id := h.enqueue(at(time.Second), task)[0]
		c := h.claimOne(at(2*time.Second), "q", "tn")
		ri := &pb.ReapItem{TaskId: id, Fence: c.GetFence()}
		if reapFirst {
			h.apply(reapCmd(at(20*time.Second), ri))
		} else {
			h.apply(timeOutCmd(at(20*time.Second), ri))
		}
		states = append(states, h.task(id).GetState())
		checkKeyspace(t, h.f)
	}
	if states[0] != pb.TaskState_TASK_STATE_FAILED || states[1] != pb.TaskState_TASK_STATE_FAILED {
		t.Fatalf("reap first: %s, timeout first: %s; want FAILED both", states[0], states[1])
	}
}
