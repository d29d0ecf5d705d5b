package nodetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/internal/testwait"
)

// FailingLogs fails StoreLogs with ENOSPC while on, like raft.db on a full
// disk. It sits where BoltDB does, under the LogCache.
type FailingLogs struct {
	raft.LogStore
	// On makes every append fail.
	On atomic.Bool
}

func (f *FailingLogs) StoreLog(l *raft.Log) error { return f.StoreLogs([]*raft.Log{l}) }

func (f *FailingLogs) StoreLogs(logs []*raft.Log) error {
	if f.On.Load() {
		return fmt.Errorf("write raft.db: %w", syscall.ENOSPC)
	}
	return f.LogStore.StoreLogs(logs)
}

// ClusterFailingLogs starts 3 nodes whose Raft log stores can be made
// to fail; logsOf names a node's.
func ClusterFailingLogs(t testing.TB) (nodes []*cluster.Node, logsOf func(id string) *FailingLogs) {
	t.Helper()
	var mu sync.Mutex
	logs := map[string]*FailingLogs{}
	nodes = ClusterWith(t, 3, func(c *cluster.Config) {
		id := c.ID
		// No periodic check: a CheckResult of the leader's own that meets
		// the failing log first would make it step down before the
		// proposal under test reaches Raft.
		c.CheckInterval = -1
		c.WrapLogStore = func(s raft.LogStore) raft.LogStore {
			f := &FailingLogs{LogStore: s}
			mu.Lock()
			logs[id] = f
			mu.Unlock()
			return f
		}
	})
	// The leader's start-up entries (the level latch, the cluster's id)
	// are in before a test turns a log's failure on.
	testwait.For(t, 10*time.Second, "the leader's start-up entries", func() bool {
		l := LeaderOf(t, nodes)
		return l.ClusterID() != "" && l.FSM().EnabledLevel() == l.FSM().MaxLevel()
	})
	return nodes, func(id string) *FailingLogs {
		mu.Lock()
		defer mu.Unlock()
		return logs[id]
	}
}
