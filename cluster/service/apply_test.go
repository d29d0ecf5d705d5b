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
	pb "github.com/dockethq/docket/proto/docketv1"
)

func enqueueCmd(queue string, payload string) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE, Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{
		Tasks: []*pb.NewTask{{Queue: queue, Tenant: "default", Payload: []byte(payload)}},
	}}}
}

// Test_PartlyAppliedBatchIsOutcomeUnknown: while Batch is not latched, a
// Batch's commands go as entries of their own; when one is refused with
// "not leader" after others applied, the answer must not say "nothing
// was done" (the client would retry a Claim or Nack that did apply).
func Test_PartlyAppliedBatchIsOutcomeUnknown(t *testing.T) {
	m, err := memnode.New(t.TempDir(), true, service.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	m.SetEnabledLevel(fsm.LevelBase)
	m.Fail(&replica.NotLeaderError{}) // the first of the three entries
	batch := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_BATCH, Body: &pb.Command_Batch{Batch: &pb.BatchCmd{
		Commands: []*pb.Command{enqueueCmd("q", "a"), enqueueCmd("q", "b"), enqueueCmd("q", "c")}}}}
	_, err = m.Service().Propose(context.Background(), batch)
	if !errors.Is(err, replica.ErrLeadershipLost) {
		t.Fatalf("a batch of which two entries applied and one was refused answered %v, want ErrLeadershipLost", err)
	}
	if p, _, _ := m.FSM().Counts("q", "default"); p != 2 {
		t.Fatalf("%d applied, want 2", p)
	}
	// All refused: nothing was done, and the answer says so.
	m.SetLeader(false)
	if _, err := m.Service().Propose(context.Background(), batch); !errors.Is(err, replica.ErrNotLeader) || errors.Is(err, replica.ErrLeadershipLost) {
		t.Fatalf("a batch refused whole answered %v, want ErrNotLeader alone", err)
	}
}

// Test_CommandWaitsForAPendingLatch: a command whose level every server
// supports waits for the leader's latch instead of failing as if a server
// ran an old build; with a server behind it fails at once.
func Test_CommandWaitsForAPendingLatch(t *testing.T) {
	m, err := memnode.New(t.TempDir(), true, service.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	m.SetEnabledLevel(fsm.LevelBase)
	pause := &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_PAUSED,
		Body: &pb.Command_SetQueuePaused{SetQueuePaused: &pb.SetQueuePausedCmd{Queue: "q", Tenant: "default", Paused: true}}}

	// A server is behind: refused at once.
	start := time.Now()
	if _, err := m.Service().Propose(context.Background(), pause); !errors.Is(err, service.ErrFeatureDisabled) {
		t.Fatalf("with a server behind: %v, want ErrFeatureDisabled", err)
	}
	if d := time.Since(start); d > service.LatchInterval {
		t.Fatalf("with a server behind the refusal took %v", d)
	}

	// Every server announced the level: the command waits for the latch.
	m.SetLatchPending(fsm.FeatureLevel)
	done := make(chan error, 1)
	go func() {
		_, err := m.Service().Propose(context.Background(), pause)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("answered %v before the latch", err)
	case <-time.After(100 * time.Millisecond): // it must still be waiting
	}
	m.SetEnabledLevel(fsm.FeatureLevel)
	if err := <-done; err != nil {
		t.Fatalf("after the latch: %v", err)
	}
}
