package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

func testConfig(t *testing.T, id string, expect int) Config {
	t.Helper()
	c := DefaultConfig()
	c.ID = id
	c.DataDir = t.TempDir()
	c.RaftAddr = "127.0.0.1:0"
	c.BootstrapExpect = expect
	c.ReapGrace = 50 * time.Millisecond
	c.ReapInterval = 20 * time.Millisecond
	c.Logger = slog.New(slog.DiscardHandler)
	c.GossipLocal = true
	return c
}

func mustNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.ID, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx) // cleanup after the assertions; tests check Shutdown themselves
	})
	return n
}

// mustCluster starts n nodes: the first bootstraps alone, the others are
// added as voters.
func mustCluster(t *testing.T, size int) []*Node {
	t.Helper()
	return mustClusterJoined(t, size, func(*Config) {})
}

// mustClusterJoined is mustCluster with each node's config edited.
func mustClusterJoined(t *testing.T, size int, edit func(*Config)) []*Node {
	t.Helper()
	first := testConfig(t, "n1", 1)
	edit(&first)
	nodes := []*Node{mustNode(t, first)}
	testwait.For(t, 5*time.Second, "n1 leader", nodes[0].IsLeader)
	for i := 2; i <= size; i++ {
		cfg := testConfig(t, fmt.Sprintf("n%d", i), 0)
		edit(&cfg)
		cfg.Join = []string{nodes[0].GossipAddr()}
		n := mustNode(t, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := nodes[0].AddServer(ctx, n.ID(), n.cfg.RaftAddr, "", false); err != nil {
			cancel()
			t.Fatalf("add %s: %v", n.ID(), err)
		}
		cancel()
		nodes = append(nodes, n)
	}
	return nodes
}

func leaderOf(t *testing.T, nodes []*Node) *Node {
	t.Helper()
	var l *Node
	testwait.For(t, 5*time.Second, "a leader", func() bool {
		for _, n := range nodes {
			if n.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func enqueueCmd(queue string, payload string) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE, Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{
		Tasks: []*pb.NewTask{{Queue: queue, Tenant: "default", Payload: []byte(payload)}},
	}}}
}

func Test_ThreeNodeReplicationConverges(t *testing.T) {
	nodes := mustCluster(t, 3)
	l := leaderOf(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 50; i++ {
		res, err := l.Service().Propose(ctx, enqueueCmd("jobs", fmt.Sprint(i)))
		if err != nil {
			t.Fatalf("propose %d: %v", i, err)
		}
		if len(res.GetItems()) != 1 || res.GetItems()[0].GetCode() != pb.Code_CODE_OK {
			t.Fatalf("propose %d: %v", i, res)
		}
	}
	last := l.FSM().AppliedIndex()
	testwait.For(t, 5*time.Second, "followers to apply", func() bool {
		for _, n := range nodes {
			if n.FSM().AppliedIndex() < last {
				return false
			}
		}
		return true
	})
	want, err := l.FSM().Hash()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		got, err := n.FSM().Hash()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%s hash %s, leader %s", n.ID(), got, want)
		}
	}
}

func Test_FollowerProposeIsNotLeader(t *testing.T) {
	nodes := mustCluster(t, 3)
	l := leaderOf(t, nodes)
	for _, n := range nodes {
		if n == l {
			continue
		}
		// A server just added learns the leader on its first AppendEntries.
		testwait.For(t, 5*time.Second, n.ID()+" to learn the leader", func() bool { id, _ := n.Leader(); return id != "" })
		_, err := n.Service().Propose(context.Background(), enqueueCmd("jobs", "x"))
		var nle *replica.NotLeaderError
		if !errorsAs(err, &nle) || nle.LeaderID != l.ID() {
			t.Fatalf("%s: got %v, want replica.NotLeaderError naming %s", n.ID(), err, l.ID())
		}
	}
}

// A linearizable read must not wait forever when the newest entries are
// ones the FSM never sees (the leader's no-op and Barrier).
func Test_ReadBarrierAfterBarrierEntry(t *testing.T) {
	nodes := mustCluster(t, 3)
	l := leaderOf(t, nodes)
	if err := l.raft.Barrier(time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := l.ReadBarrier(ctx); err != nil {
		t.Fatalf("read barrier after a Barrier entry: %v", err)
	}
}
