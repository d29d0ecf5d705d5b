package raftlog_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/raftlog"
	"github.com/dockethq/docket/internal/testwait"
)

// A three-node cluster on raft-wal replicates, and a node restarted on its
// wal keeps its log, term and vote: the write made before the restart is
// read back on it after it rejoins.
func Test_WALStoreClusterSurvivesRestart(t *testing.T) {
	nodes := walCluster(t, nil)
	leader := nodetest.LeaderOf(t, nodes)
	id := nodetest.ProposeOK(t, leader, "wal-"+fmt.Sprint(rand.Uint64()))
	for _, n := range nodes {
		if statOK(filepath.Join(n.Internals().Config.DataDir, raftlog.BoltFile)) {
			t.Fatalf("%s wrote a raft.db on --log-store wal", n.Internals().Config.ID)
		}
		if !statOK(filepath.Join(n.Internals().Config.DataDir, raftlog.WALDir)) {
			t.Fatalf("%s has no %s dir", n.Internals().Config.ID, raftlog.WALDir)
		}
	}
	follower := nodetest.FollowerOf(nodes, leader)
	testwait.For(t, 5*time.Second, "follower applied the write", func() bool {
		return follower.Internals().Raft.AppliedIndex() >= leader.Internals().Raft.AppliedIndex()
	})
	term := follower.Internals().Raft.CurrentTerm()
	cfg := follower.Internals().Config
	if err := follower.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	again, err := cluster.New(cfg)
	if err != nil {
		t.Fatalf("restart on wal: %v", err)
	}
	t.Cleanup(func() { _ = again.Shutdown(context.Background()) })
	if got := again.Internals().Raft.CurrentTerm(); got < term {
		t.Fatalf("restarted node's term %d, was %d: the wal lost the stable store", got, term)
	}
	testwait.For(t, 10*time.Second, "restarted node has the task", func() bool {
		_, err := again.FSM().GetTask(id)
		return err == nil
	})
}

// A data dir keeps the log store it was born with. Before this check a
// node started with the other store saw an empty log and stable store: it
// forgot its term and vote and rejoined as a new server.
func Test_LogStoreSwitchRefused(t *testing.T) {
	for _, tc := range []struct{ from, to, file string }{
		{raftlog.LogStoreBolt, raftlog.LogStoreWAL, raftlog.BoltFile},
		{raftlog.LogStoreWAL, raftlog.LogStoreBolt, raftlog.WALDir},
	} {
		t.Run(tc.from+"-to-"+tc.to, func(t *testing.T) {
			cfg := nodetest.Config(t, "n1", 1)
			cfg.LogStore = tc.from
			n := nodetest.Start(t, cfg)
			testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
			nodetest.ProposeOK(t, n, "x")
			if err := n.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			cfg.RaftAddr = n.Internals().Config.RaftAddr
			cfg.LogStore = tc.to
			n2, err := cluster.New(cfg)
			if err == nil {
				_ = n2.Shutdown(context.Background())
				t.Fatalf("a %s data dir started on --log-store %s", tc.from, tc.to)
			}
			if !errors.Is(err, raftlog.ErrLogStoreMismatch) || !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), "--log-store "+tc.from) {
				t.Fatalf("New: %v, want raftlog.ErrLogStoreMismatch naming %s and --log-store %s", err, tc.file, tc.from)
			}
		})
	}
}

// Without --log-store a node opens the store its data dir was born with,
// and a new data dir gets raftlog.DefaultForNew: an upgrade that changed
// the default must not switch (and so refuse) the nodes it finds.
func Test_LogStoreUnnamedKeepsTheDataDirsStore(t *testing.T) {
	for _, born := range []string{raftlog.LogStoreAuto, raftlog.LogStoreBolt, raftlog.LogStoreWAL} {
		t.Run("born-"+born, func(t *testing.T) {
			want := born
			if born == raftlog.LogStoreAuto {
				want = raftlog.DefaultForNew
			}
			cfg := nodetest.Config(t, "n1", 1)
			cfg.LogStore = born
			n := nodetest.Start(t, cfg)
			testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
			nodetest.ProposeOK(t, n, "before")
			if err := n.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			cfg.RaftAddr = n.Internals().Config.RaftAddr
			cfg.LogStore = raftlog.LogStoreAuto
			n2 := nodetest.Start(t, cfg)
			testwait.For(t, 5*time.Second, "n1 leader again", n2.IsLeader)
			nodetest.ProposeOK(t, n2, "after")
			bolt := statOK(filepath.Join(cfg.DataDir, raftlog.BoltFile))
			wal := statOK(filepath.Join(cfg.DataDir, raftlog.WALDir))
			if got := map[bool]string{true: raftlog.LogStoreBolt, false: raftlog.LogStoreWAL}[bolt]; got != want || bolt == wal {
				t.Fatalf("born %q: data dir holds raft.db=%v raft-wal=%v, want only %s", born, bolt, wal, want)
			}
		})
	}
}

// The checksums sit over raft-wal too: a damaged stable value in its meta
// file stops the start, naming the store.
func Test_WALStoreStableDamageRefusedAtStart(t *testing.T) {
	cfg := nodetest.Config(t, "n1", 1)
	cfg.LogStore = raftlog.LogStoreWAL
	n := nodetest.Start(t, cfg)
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	nodetest.ProposeOK(t, n, "x")
	if err := n.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cfg.DataDir, raftlog.WALDir)
	metas, err := filepath.Glob(filepath.Join(dir, "*.db"))
	if err != nil || len(metas) != 1 {
		t.Fatalf("wal meta file: %v %v", metas, err)
	}
	nodetest.FlipInFile(t, metas[0], []byte("CurrentTerm"), len("CurrentTerm"), []byte{0x01})
	cfg.RaftAddr = n.Internals().Config.RaftAddr
	n2, err := cluster.New(cfg)
	if err == nil {
		_ = n2.Shutdown(context.Background())
		t.Fatal("New started with a damaged CurrentTerm in the wal's meta file")
	}
	if !errors.Is(err, raftlog.ErrRaftStoreCorrupt) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("New: %v, want raftlog.ErrRaftStoreCorrupt naming %s", err, dir)
	}
}

func Test_LogStoreUnknownRefused(t *testing.T) {
	cfg := nodetest.Config(t, "n1", 1)
	cfg.LogStore = "rocks"
	if n, err := cluster.New(cfg); err == nil {
		_ = n.Shutdown(context.Background())
		t.Fatal("New accepted --log-store rocks")
	}
	if entries, _ := os.ReadDir(cfg.DataDir); len(entries) != 0 {
		t.Fatalf("a refused config left files: %v", entries)
	}
}

// walCluster starts three nodes on raft-wal: the first bootstraps alone,
// the others are added as voters.
func walCluster(t *testing.T, tune func(*cluster.Config)) []*cluster.Node {
	t.Helper()
	config := func(id string, expect int) cluster.Config {
		c := nodetest.Config(t, id, expect)
		c.LogStore = raftlog.LogStoreWAL
		if tune != nil {
			tune(&c)
		}
		return c
	}
	nodes := []*cluster.Node{nodetest.Start(t, config("n1", 1))}
	testwait.For(t, 5*time.Second, "n1 leader", nodes[0].IsLeader)
	for i := 2; i <= 3; i++ {
		c := config(fmt.Sprintf("n%d", i), 0)
		c.Join = []string{nodes[0].GossipAddr()}
		n := nodetest.Start(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := nodes[0].AddServer(ctx, n.ID(), n.Internals().Config.RaftAddr, "", false)
		cancel()
		if err != nil {
			t.Fatalf("add %s: %v", n.ID(), err)
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// A follower on raft-wal that missed more than the trailing logs catches
// up from a snapshot, then from the entries after it. raft-wal refuses a
// gap in the log, so Raft must empty it after installing the snapshot,
// which it does only if the store says it is monotonic: without that the
// follower's append after the snapshot failed and it never caught up.
func Test_WALStoreFollowerCatchesUpFromSnapshot(t *testing.T) {
	nodes := walCluster(t, func(c *cluster.Config) {
		c.TrailingLogs = 2
		c.SnapshotThreshold = 8
	})
	leader := nodetest.LeaderOf(t, nodes)
	follower := nodetest.FollowerOf(nodes, leader)
	nodetest.ProposeOK(t, leader, "before")
	testwait.For(t, 5*time.Second, "follower applied the first write", func() bool {
		return follower.Internals().Raft.AppliedIndex() >= leader.Internals().Raft.AppliedIndex()
	})
	cfg := follower.Internals().Config
	if err := follower.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var last string
	for i := 0; i < 40; i++ {
		last = nodetest.ProposeOK(t, leader, fmt.Sprintf("while-away-%d", i))
	}
	if err := leader.Internals().Raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	first, err := leader.Internals().Logs.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first <= follower.Internals().Raft.AppliedIndex()+1 {
		t.Fatalf("leader's log starts at %d: the follower could catch up without a snapshot", first)
	}
	again, err := cluster.New(cfg)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(func() { _ = again.Shutdown(context.Background()) })
	after := nodetest.ProposeOK(t, leader, "after")
	testwait.For(t, 15*time.Second, "follower has the writes from before and after the snapshot", func() bool {
		_, e1 := again.FSM().GetTask(last)
		_, e2 := again.FSM().GetTask(after)
		return e1 == nil && e2 == nil
	})
}

// A restore on raft-wal: Raft gives the restored snapshot an index past the
// log's end, which leaves a gap raft-wal refuses unless Raft empties the
// log first, as it does for a store that says it is monotonic. Without
// that the first write after the restore failed.
func Test_WALStoreBackupRestore(t *testing.T) {
	nodetest.BackupRestoreRoundTrip(t, walCluster(t, nil))
}

// statOK reports whether path exists.
func statOK(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
