package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster/memnode"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_ObserverReadsNoPebble: an applied batch wakes the waiters it can
// satisfy from the counts its Event carries. The observer runs on Raft's
// apply goroutine; before, it read each waited-on queue's catalog record
// there (Counts) for every batch.
func Test_ObserverReadsNoPebble(t *testing.T) {
	m, err := memnode.New(t.TempDir(), true, service.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	s := m.Service()

	ref := fsm.QueueRef{Queue: "q", Tenant: "default"}
	waiters := make([]<-chan struct{}, 3)
	for i := range waiters {
		ch, release := service.WatchQueue(s, ref)
		t.Cleanup(release)
		waiters[i] = ch
	}
	before := m.FSM().Reads()
	// Applied here, on this goroutine, as Raft's apply goroutine would:
	// the observer runs inside this call.
	res, err := m.Apply(context.Background(), &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE,
		Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: []*pb.NewTask{
			{Queue: "q", Tenant: "default"}, {Queue: "q", Tenant: "default"},
		}}}})
	if err != nil || res.GetErrorCode() != pb.Code_CODE_OK {
		t.Fatalf("enqueue: %v, %v", res, err)
	}
	if n := m.FSM().Reads() - before; n != 0 {
		t.Fatalf("the observer read the keyspace %d times while the batch applied, want 0", n)
	}
	woken := 0
	for _, ch := range waiters {
		select {
		case <-ch:
			woken++
		default:
		}
	}
	if woken != 2 {
		t.Fatalf("%d waiters woken for 2 pending tasks, want 2", woken)
	}
}

func mustMemNode(t *testing.T, leader bool) *memnode.Node {
	t.Helper()
	m, err := memnode.New(t.TempDir(), leader, service.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// Drain ends a waiting Claim at once with an empty answer, and later long
// polls do not wait.
func Test_DrainEndsLongPolls(t *testing.T) {
	m := mustMemNode(t, true)
	claim := &pb.ClaimRequest{Queue: "q", WorkerId: "w"}
	cmd := m.Service().ClaimCommand(claim)
	type answer struct {
		tasks []*pb.Task
		err   error
	}
	ch := make(chan answer, 1)
	go func() {
		tasks, err := m.Service().Claim(context.Background(), cmd, time.Minute)
		ch <- answer{tasks, err}
	}()
	testwait.For(t, 5*time.Second, "the claim to wait", func() bool { _, _, w := m.Service().Waiting(); return w == 1 })
	m.Service().Drain()
	select {
	case a := <-ch:
		if a.err != nil || len(a.tasks) != 0 {
			t.Fatalf("drained claim: %v, %v; want an empty answer", a.tasks, a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the claim still waits after Drain")
	}
	start := time.Now()
	if tasks, err := m.Service().Claim(context.Background(), cmd, time.Minute); err != nil || len(tasks) != 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("claim after Drain: %v, %v after %v; want empty at once", tasks, err, time.Since(start))
	}
}

// After close, proposals are refused with replica.ErrShutdown, batched or alone,
// and nothing is started that close would not wait for.
func Test_ClosedServiceRefusesProposals(t *testing.T) {
	m := mustMemNode(t, true)
	m.Service().Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	enq := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE,
		Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: []*pb.NewTask{{Queue: "q", Tenant: "t"}}}}}
	if _, err := m.Service().Propose(ctx, enq); !errors.Is(err, replica.ErrShutdown) {
		t.Fatalf("batched proposal after close: %v; want replica.ErrShutdown", err)
	}
	if _, err := m.Service().ProposeOrphan(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_PURGE,
		Body: &pb.Command_Purge{Purge: &pb.PurgeCmd{}}}, func(*pb.CommandResult) {}); !errors.Is(err, replica.ErrShutdown) {
		t.Fatalf("lone proposal with an orphan after close: %v; want replica.ErrShutdown", err)
	}
}

// Reads say their consistency: a follower refuses a linearizable read
// (the API layer forwards it) and answers a stale one from its replica.
func Test_ReadsAtConsistency(t *testing.T) {
	m := mustMemNode(t, false)
	ctx := context.Background()
	if _, _, err := m.Service().GetTask(ctx, "x", service.Linearizable); !errors.Is(err, replica.ErrNotLeader) {
		t.Fatalf("linearizable read on a follower: %v; want not-leader", err)
	}
	if _, _, err := m.Service().GetTask(ctx, "x", service.Stale); !errors.Is(err, pb.ErrNotFound) {
		t.Fatalf("stale read on a follower: %v; want not found from its replica", err)
	}
	if _, _, err := m.Service().Stats(ctx, "", "", "", service.Linearizable); !errors.Is(err, replica.ErrNotLeader) {
		t.Fatalf("linearizable stats on a follower: %v; want not-leader", err)
	}
}
