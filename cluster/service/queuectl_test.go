package service_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_QueueControlGatedBeforeLatch: while a server runs a build below
// LevelQueueControl, pause and purge are refused with FEATURE_DISABLED
// and nothing is proposed.
func Test_QueueControlGatedBeforeLatch(t *testing.T) {
	n := nodetest.Start(t, nodetest.AtLevel(t, "n1", 1, fsm.LevelCounters))
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	testwait.For(t, 5*time.Second, "the old build's level latched", func() bool { return n.FSM().EnabledLevel() == fsm.LevelCounters })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	before := n.FSM().AppliedIndex()
	for _, cmd := range []*pb.Command{service.SetQueuePausedCommand("a", "", true), service.PurgeQueueCommand("a", "", false)} {
		_, err := n.Service().Propose(ctx, cmd)
		var fe *service.FeatureError
		if !errors.As(err, &fe) || fe.Need != fsm.LevelQueueControl || fe.Enabled != fsm.LevelCounters {
			t.Fatalf("%v on a level-%d cluster: %v, want service.FeatureError need %d", cmd.GetType(), fsm.LevelCounters, err, fsm.LevelQueueControl)
		}
	}
	if _, err := n.Service().PurgeQueue(ctx, service.PurgeQueueCommand("a", "", true)); !errors.Is(err, service.ErrFeatureDisabled) {
		t.Fatalf("PurgeQueue: %v", err)
	}
	if got := n.FSM().AppliedIndex(); got != before {
		t.Fatalf("applied index %d → %d: a refused command was proposed", before, got)
	}
}

// Test_PausedQueueLongPoll: a long poll on a paused queue waits as on an
// empty one, proposing nothing, and resuming wakes it with the task.
func Test_PausedQueueLongPoll(t *testing.T) {
	n := nodetest.Cluster(t, 1)[0]
	nodetest.WaitLevel(t, fsm.LevelQueueControl, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := nodetest.EnqueueN(t, ctx, n, "a", 1)[0]
	nodetest.MustApply(t, ctx, n, service.SetQueuePausedCommand("a", "", true))
	before := n.FSM().AppliedIndex()
	start := time.Now()
	if got := nodetest.ClaimNow(t, ctx, n, "a", 300*time.Millisecond); len(got) != 0 {
		t.Fatalf("claim of a paused queue took %v", got)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("claim of a paused queue answered after %v; it should wait out its 300 ms", took)
	}
	// The leader's own loops may append an entry meanwhile; a claim that
	// proposed while paused would find nothing and look again, dozens of
	// entries in 300 ms.
	if got := n.FSM().AppliedIndex(); got > before+2 {
		t.Fatalf("a waiting claim on a paused queue proposed: applied %d → %d", before, got)
	}
	ch := make(chan []*pb.Task, 1)
	go func() { ch <- nodetest.ClaimNow(t, ctx, n, "a", time.Minute) }()
	testwait.For(t, 5*time.Second, "the claim to wait", func() bool { _, _, w := n.Service().Waiting(); return w == 1 })
	nodetest.MustApply(t, ctx, n, service.SetQueuePausedCommand("a", "", false))
	select {
	case got := <-ch:
		if len(got) != 1 || got[0].GetId() != id {
			t.Fatalf("woken claim took %v, want %s", got, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll still waits 10 s after the resume")
	}
}

// Test_PauseSurvivesFailover: the pause is replicated state; the next
// leader's claims take nothing until it is resumed there.
func Test_PauseSurvivesFailover(t *testing.T) {
	nodes := nodetest.Cluster(t, 3)
	l := nodetest.LeaderOf(t, nodes)
	nodetest.WaitLevel(t, fsm.LevelQueueControl, nodes...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodetest.MustApply(t, ctx, l, service.SetQueuePausedCommand("a", "", true))
	id := nodetest.EnqueueN(t, ctx, l, "a", 1)[0]
	if err := l.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var rest []*cluster.Node
	for _, n := range nodes {
		if n != l {
			rest = append(rest, n)
		}
	}
	nl := nodetest.LeaderOf(t, rest)
	if err := nl.ReadBarrier(ctx); err != nil {
		t.Fatal(err)
	}
	if got := nodetest.ClaimNow(t, ctx, nl, "a", 0); len(got) != 0 {
		t.Fatalf("the new leader handed out %v of a paused queue", got)
	}
	if st, _, err := nl.Service().Stats(ctx, "a", "default", "", service.Linearizable); err != nil || len(st) != 1 || !st[0].GetPaused() || st[0].GetPending() != 1 {
		t.Fatalf("stats on the new leader: %v %v", st, err)
	}
	nodetest.MustApply(t, ctx, nl, service.SetQueuePausedCommand("a", "", false))
	if got := nodetest.ClaimNow(t, ctx, nl, "a", 0); len(got) != 1 || got[0].GetId() != id {
		t.Fatalf("claim after resume: %v, want %s", got, id)
	}
}

// Test_PurgeQueueInSteps: a purge larger than one command's limit runs as
// several and counts them all; running tasks stay.
func Test_PurgeQueueInSteps(t *testing.T) {
	n := nodetest.Cluster(t, 1)[0]
	nodetest.WaitLevel(t, fsm.LevelQueueControl, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const total = 2*service.PurgeStep + 300
	for done := 0; done < total; {
		k := min(pb.MaxBatch, total-done)
		tasks := make([]*pb.NewTask, k)
		for i := range tasks {
			tasks[i] = &pb.NewTask{Queue: "a", Tenant: "default", Payload: []byte(fmt.Sprint(done + i))}
		}
		nodetest.MustApply(t, ctx, n, service.EnqueueCommand(&pb.EnqueueRequest{Tasks: tasks}))
		done += k
	}
	if got := nodetest.ClaimNow(t, ctx, n, "a", 0); len(got) != 1 {
		t.Fatalf("claim: %v", got)
	}
	before := n.FSM().AppliedIndex()
	purged, err := n.Service().PurgeQueue(ctx, service.PurgeQueueCommand("a", "", false))
	if err != nil || purged != total-1 {
		t.Fatalf("purge: %d, %v; want %d", purged, err, total-1)
	}
	// Three commands (1,000, 1,000, 299); the leader's own loops may add
	// an entry meanwhile.
	if entries := n.FSM().AppliedIndex() - before; entries < 3 || entries > 4 {
		t.Fatalf("purge of %d took %d entries, want 3", total-1, entries)
	}
	p, _, err := n.FSM().Counts("a", "default")
	if err != nil || p != 0 {
		t.Fatalf("pending after purge: %d %v", p, err)
	}
}
