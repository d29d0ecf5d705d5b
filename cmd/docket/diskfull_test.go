package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/cluster"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// failingLog fails Raft log appends with ENOSPC while on, as raft.db on a
// full disk does.
type failingLog struct {
	raft.LogStore
	on atomic.Bool
}

func (f *failingLog) StoreLog(l *raft.Log) error { return f.StoreLogs([]*raft.Log{l}) }

func (f *failingLog) StoreLogs(logs []*raft.Log) error {
	if f.on.Load() {
		return fmt.Errorf("write raft.db: %w", syscall.ENOSPC)
	}
	return f.LogStore.StoreLogs(logs)
}

// A leader whose disk is full answered Internal, which the client does not
// retry. It must step down and answer Unavailable, and the client must get
// its write through on the next leader while the full disk stays full.
func Test_LeaderLogWriteFailureIsUnavailableAndRetried(t *testing.T) {
	var mu sync.Mutex
	logs := map[string]*failingLog{}
	nodes := startCluster(t, 3, func(c *cluster.Config) {
		id := c.ID
		c.WrapLogStore = func(s raft.LogStore) raft.LogStore {
			f := &failingLog{LogStore: s}
			mu.Lock()
			logs[id] = f
			mu.Unlock()
			return f
		}
	})
	leader := waitLeader(t, nodes)
	mu.Lock()
	bad := logs[leader.id]
	mu.Unlock()
	bad.on.Store(true)
	t.Cleanup(func() { bad.on.Store(false) })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := rawQueue(t, leader.grpcAddr).Enqueue(ctx, &pb.EnqueueRequest{
		Tasks: []*pb.NewTask{{Queue: "jobs", Payload: []byte("lost?")}}})
	if code := status.Code(err); code != codes.Unavailable {
		t.Fatalf("enqueue on a leader whose log write fails: %v; want Unavailable", err)
	}

	c := mustClient(t, addrsOf(nodes)...)
	id, err := c.EnqueueOne(ctx, "jobs", []byte("retried"))
	if err != nil {
		t.Fatalf("client enqueue while the old leader's disk is full: %v", err)
	}
	if leader.node.IsLeader() {
		t.Errorf("%s leads although it cannot write its log", leader.id)
	}
	t.Logf("enqueued %s; %s health: %q", id, leader.id, leader.node.HealthProblems())
}
