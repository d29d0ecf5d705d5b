package cluster

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// countingReplica counts the Service's uses of the replica's FSM: every
// read of Pebble the Service makes goes through FSM().
type countingReplica struct {
	*MemNode
	reads atomic.Int64
}

func (c *countingReplica) FSM() *fsm.FSM {
	c.reads.Add(1)
	return c.MemNode.FSM()
}

// Test_ObserverReadsNoPebble: an applied batch wakes the waiters it can
// satisfy from the counts its Event carries. The observer runs on Raft's
// apply goroutine; before, it read each waited-on queue's catalog record
// there (Counts) for every batch.
func Test_ObserverReadsNoPebble(t *testing.T) {
	m, err := NewMemNode(t.TempDir(), true, ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	m.Service.close() // replaced by one over the counting replica
	r := &countingReplica{MemNode: m}
	s := newService(r, ServiceConfig{})
	t.Cleanup(s.close)

	ref := fsm.QueueRef{Queue: "q", Tenant: "default"}
	waiters := make([]<-chan struct{}, 3)
	for i := range waiters {
		ch, release := s.hub.watchQueue(ref)
		t.Cleanup(release)
		waiters[i] = ch
	}
	before := r.reads.Load()
	// Applied here, on this goroutine, as Raft's apply goroutine would:
	// the observer runs inside this call.
	res, err := m.apply(context.Background(), &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE,
		Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: []*pb.NewTask{
			{Queue: "q", Tenant: "default"}, {Queue: "q", Tenant: "default"},
		}}}})
	if err != nil || res.GetErrorCode() != pb.Code_CODE_OK {
		t.Fatalf("enqueue: %v, %v", res, err)
	}
	if n := r.reads.Load() - before; n != 0 {
		t.Fatalf("the observer read the FSM %d times while the batch applied, want 0", n)
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
