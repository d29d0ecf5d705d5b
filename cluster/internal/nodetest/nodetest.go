// Package nodetest starts real cluster nodes on loopback for the tests of
// cluster and its sub-packages: a test of raftlog, check or health that
// needs a running node gets it here, not from the cluster root's tests.
// Tests import it; production code never does (the layout test holds it).
package nodetest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Config is a node's config for a test: a temp data dir, loopback ports
// chosen by the kernel, a fast reaper, local gossip and no log output.
// expect is BootstrapExpect: 1 for a node that bootstraps alone, 0 for one
// that waits to be added.
func Config(t testing.TB, id string, expect int) cluster.Config {
	t.Helper()
	c := cluster.DefaultConfig()
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

// Start starts a node and shuts it down when the test ends.
func Start(t testing.TB, cfg cluster.Config) *cluster.Node {
	t.Helper()
	n, err := cluster.New(cfg)
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

// Cluster starts size nodes: n1 bootstraps alone, the others join its
// gossip and are added as voters.
func Cluster(t testing.TB, size int) []*cluster.Node {
	t.Helper()
	return start(t, size, true, func(*cluster.Config) {})
}

// ClusterJoined is Cluster with each node's config edited.
func ClusterJoined(t testing.TB, size int, edit func(*cluster.Config)) []*cluster.Node {
	t.Helper()
	return start(t, size, true, edit)
}

// ClusterWith is ClusterJoined without the gossip join: the voters are
// added by n1 alone, so nothing but the test changes the configuration.
func ClusterWith(t testing.TB, size int, edit func(*cluster.Config)) []*cluster.Node {
	t.Helper()
	return start(t, size, false, edit)
}

func start(t testing.TB, size int, join bool, edit func(*cluster.Config)) []*cluster.Node {
	t.Helper()
	first := Config(t, "n1", 1)
	edit(&first)
	nodes := []*cluster.Node{Start(t, first)}
	testwait.For(t, 5*time.Second, "n1 leader", nodes[0].IsLeader)
	for i := 2; i <= size; i++ {
		cfg := Config(t, fmt.Sprintf("n%d", i), 0)
		edit(&cfg)
		if join {
			cfg.Join = []string{nodes[0].GossipAddr()}
		}
		n := Start(t, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := nodes[0].AddServer(ctx, n.ID(), RaftAddr(n), "", false)
		cancel()
		if err != nil {
			t.Fatalf("add %s: %v", n.ID(), err)
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// RaftAddr is the address n's Raft transport bound.
func RaftAddr(n *cluster.Node) string { return n.Internals().Config.RaftAddr }

// LeaderOf waits for one of nodes to lead and returns it.
func LeaderOf(t testing.TB, nodes []*cluster.Node) *cluster.Node {
	t.Helper()
	var l *cluster.Node
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

// FollowerOf is the first of nodes that is not leader.
func FollowerOf(nodes []*cluster.Node, leader *cluster.Node) *cluster.Node {
	for _, n := range nodes {
		if n != leader {
			return n
		}
	}
	return nil
}

// EnqueueCmd is an Enqueue of one task with payload to queue, tenant
// "default".
func EnqueueCmd(queue, payload string) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE, Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{
		Tasks: []*pb.NewTask{{Queue: queue, Tenant: "default", Payload: []byte(payload)}},
	}}}
}

// ProposeOK enqueues payload to "jobs" through n, which must lead, and
// returns the task's id.
func ProposeOK(t testing.TB, n *cluster.Node, payload string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := n.Service().Propose(ctx, EnqueueCmd("jobs", payload))
	if err != nil {
		t.Fatalf("propose: %v", err)
	}
	if len(res.GetItems()) != 1 || res.GetItems()[0].GetCode() != pb.Code_CODE_OK {
		t.Fatalf("propose: %v", res)
	}
	return res.GetItems()[0].GetTaskId()
}

// EnqueueN enqueues n tasks to queue through l and returns their ids.
func EnqueueN(t testing.TB, ctx context.Context, l *cluster.Node, queue string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		res, err := l.Service().Propose(ctx, EnqueueCmd(queue, fmt.Sprint(i)))
		if err != nil || pb.ResultError(res) != nil {
			t.Fatalf("enqueue %s %d: %v %v", queue, i, res, err)
		}
		ids = append(ids, res.GetItems()[0].GetTaskId())
	}
	return ids
}

// MustApply proposes cmd through n and fails the test on an error or a
// whole-command rejection.
func MustApply(t testing.TB, ctx context.Context, n *cluster.Node, cmd *pb.Command) *pb.CommandResult {
	t.Helper()
	res, err := n.Service().Propose(ctx, cmd)
	if err == nil {
		err = pb.ResultError(res)
	}
	if err != nil {
		t.Fatalf("%v: %v", cmd.GetType(), err)
	}
	return res
}

// PendingOn is the count of pending tasks of queue (tenant "default") in
// n's FSM.
func PendingOn(t testing.TB, n *cluster.Node, queue string) uint64 {
	t.Helper()
	p, _, err := n.FSM().Counts(queue, "default")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// WaitLevel waits until every node latched feature level (at least) level.
func WaitLevel(t testing.TB, level uint32, nodes ...*cluster.Node) {
	t.Helper()
	testwait.For(t, 10*time.Second, fmt.Sprintf("feature level %d latched on every node", level), func() bool {
		for _, n := range nodes {
			if n.FSM().EnabledLevel() < level {
				return false
			}
		}
		return true
	})
}

// FlipInFile XORs mask into every occurrence of needle in the file, in
// place (the inode stays, as under a running BoltDB), at needle offset off.
// Every copy is hit, the live page's and any stale page's, so the live one
// surely changes. It returns how many copies it changed.
func FlipInFile(t testing.TB, path string, needle []byte, off int, mask []byte) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for i := 0; ; {
		j := bytes.Index(data[i:], needle)
		if j < 0 {
			break
		}
		at := i + j + off
		b := make([]byte, len(mask))
		copy(b, data[at:at+len(mask)])
		for k := range b {
			b[k] ^= mask[k]
		}
		if _, err := f.WriteAt(b, int64(at)); err != nil {
			t.Fatal(err)
		}
		n++
		i = i + j + 1
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("%q not found in %s", needle, path)
	}
	return n
}

// AtLevel is Config for a server whose build applies up to level: the
// in-process stand-in for an older binary.
func AtLevel(t testing.TB, id string, expect int, level uint32) cluster.Config {
	t.Helper()
	c := Config(t, id, expect)
	c.EditFSMOptions = func(o *fsm.Options) { o.MaxLevel = level }
	return c
}

// AssertNotProposedSince fails the test if n's log holds a command of
// type typ (alone or in a batch) above index from: a refused command must
// not reach Raft.
func AssertNotProposedSince(t testing.TB, n *cluster.Node, from uint64, typ pb.CommandType, when string) {
	t.Helper()
	in := n.Internals()
	for i := from + 1; i <= in.Raft.LastIndex(); i++ {
		var l raft.Log
		if err := in.Logs.GetLog(i, &l); err != nil {
			t.Fatalf("%s: read entry %d: %v", when, i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		cmd, err := fsm.DecodeCommand(l.Data)
		if err != nil {
			t.Fatalf("%s: decode entry %d: %v", when, i, err)
		}
		for _, c := range append([]*pb.Command{cmd}, cmd.GetBatch().GetCommands()...) {
			if c.GetType() == typ {
				t.Fatalf("%s: entry %d holds %v: the refused command was proposed", when, i, typ)
			}
		}
	}
}

// ClaimNow claims from queue through n's Service as worker "w", waiting up
// to wait, and fails the test on an error.
func ClaimNow(t testing.TB, ctx context.Context, n *cluster.Node, queue string, wait time.Duration) []*pb.Task {
	t.Helper()
	svc := n.Service()
	tasks, err := svc.Claim(ctx, svc.ClaimCommand(&pb.ClaimRequest{Queue: queue, WorkerId: "w"}), wait)
	if err != nil {
		t.Fatalf("claim %s: %v", queue, err)
	}
	return tasks
}

// WaitApplied waits until n's FSM applied index.
func WaitApplied(t testing.TB, n *cluster.Node, index uint64) {
	t.Helper()
	testwait.For(t, 5*time.Second, fmt.Sprintf("%s to apply %d", n.ID(), index), func() bool {
		return n.FSM().AppliedIndex() >= index
	})
}
