package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// announce records on every node that each server announced its build's
// level, as gossip does.
func announce(nodes []*cluster.Node, levels map[string]uint32) {
	for _, n := range nodes {
		for id, l := range levels {
			cluster.Announce(n, id, l)
		}
	}
}

func createTokenCmd() *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CREATE_TOKEN, Body: &pb.Command_CreateToken{CreateToken: &pb.CreateTokenCmd{
		Token: &pb.Token{Accessor: "acc", Name: "t", SecretHash: fsm.HashSecret("s3cret-s3cret-s3cret"), Roles: []string{"admin"}, Tenants: []string{"*"}},
	}}}
}

// Test_FeatureGatedUntilEveryServerSupportsIt is the "a feature is
// gated until all voters support it, then latched". A cluster with one
// server on an older build (level LevelCheck: no tokens) refuses token
// commands without proposing them, also while that server is down (its
// last announced level still counts). Once it is replaced by a current
// build, the leader latches the new level, tokens work, and the latch
// survives a change of leader.
func Test_FeatureGatedUntilEveryServerSupportsIt(t *testing.T) {
	old := nodetest.Start(t, nodetest.AtLevel(t, "n1", 1, fsm.LevelCheck))
	testwait.For(t, 5*time.Second, "n1 leader", old.IsLeader)
	testwait.For(t, 5*time.Second, "the old build's level latched", func() bool { return old.FSM().EnabledLevel() == fsm.LevelCheck })
	nodes := []*cluster.Node{old}
	for _, id := range []string{"n2", "n3"} {
		n := nodetest.Start(t, nodetest.Config(t, id, 0))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := old.AddServer(ctx, n.ID(), n.Internals().Config.RaftAddr, "", false)
		cancel()
		if err != nil {
			t.Fatalf("add %s: %v", id, err)
		}
		nodes = append(nodes, n)
	}
	announce(nodes, map[string]uint32{"n1": fsm.LevelCheck, "n2": fsm.FeatureLevel, "n3": fsm.FeatureLevel})

	refused := func(n *cluster.Node, when string) {
		t.Helper()
		before := n.Internals().Raft.LastIndex()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := n.Service().Propose(ctx, createTokenCmd())
		var fe *service.FeatureError
		if !errors.As(err, &fe) || !errors.Is(err, service.ErrFeatureDisabled) || fe.Need != fsm.LevelTokens || fe.Enabled != fsm.LevelCheck {
			t.Fatalf("%s: CreateToken answered %v, want service.FeatureError need %d enabled %d", when, err, fsm.LevelTokens, fsm.LevelCheck)
		}
		nodetest.AssertNotProposedSince(t, n, before, pb.CommandType_COMMAND_TYPE_CREATE_TOKEN, when)
	}
	refused(nodetest.LeaderOf(t, nodes), "old build leads")

	// The old server goes down. The new leader still holds the latch at the
	// level the old server last announced: it may come back.
	if err := old.Internals().Raft.LeadershipTransfer().Error(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := old.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rest := nodes[1:]
	l := nodetest.LeaderOf(t, rest)
	if err := cluster.LatchOnce(ctx, l); err != nil {
		t.Fatal(err)
	}
	refused(l, "old build down")

	// Replace it with a current build: remove n1, add n4.
	if err := l.RemoveServer(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	n4 := nodetest.Start(t, nodetest.Config(t, "n4", 0))
	if err := l.AddServer(ctx, "n4", n4.Internals().Config.RaftAddr, "", false); err != nil {
		t.Fatal(err)
	}
	rest = append(rest, n4)
	announce(rest, map[string]uint32{"n2": fsm.FeatureLevel, "n3": fsm.FeatureLevel, "n4": fsm.FeatureLevel})
	testwait.For(t, 10*time.Second, "the leader to latch the current level", func() bool {
		return l.FSM().EnabledLevel() == fsm.FeatureLevel
	})
	if res, err := l.Service().Propose(ctx, createTokenCmd()); err != nil || pb.ResultError(res) != nil {
		t.Fatalf("CreateToken after the latch: %v %v", res, err)
	}
	// Latched for good: every replica holds it, and a new leader keeps it.
	last := l.FSM().AppliedIndex()
	testwait.For(t, 5*time.Second, "every replica to apply the latch", func() bool {
		for _, n := range rest {
			if n.FSM().AppliedIndex() < last || n.FSM().EnabledLevel() != fsm.FeatureLevel {
				return false
			}
		}
		return true
	})
	if err := l.Internals().Raft.LeadershipTransfer().Error(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "a new leader", func() bool {
		for _, n := range rest {
			if n != l && n.IsLeader() {
				return true
			}
		}
		return false
	})
	if got := nodetest.LeaderOf(t, rest).FSM().EnabledLevel(); got != fsm.FeatureLevel {
		t.Fatalf("new leader's enabled level %d", got)
	}
}

// Test_BatchesWaitForTheirLevel: while Batch is not latched, concurrent
// commands still all apply, each in an entry of its own, and SubmitBatch's
// Batch command is split the same way.
func Test_BatchesWaitForTheirLevel(t *testing.T) {
	n := nodetest.Start(t, nodetest.AtLevel(t, "n1", 1, fsm.LevelBase))
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	testwait.For(t, 5*time.Second, "the base level latched", func() bool { return n.FSM().EnabledLevel() == fsm.LevelBase })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const callers = 32
	errs := make(chan error, callers)
	for i := range callers {
		go func() {
			res, err := n.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", fmt.Sprint(i)))
			if err == nil {
				err = pb.ResultError(res)
			}
			errs <- err
		}()
	}
	for range callers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var cmds []*pb.Command
	for i := range 3 {
		cmds = append(cmds, nodetest.EnqueueCmd("more", fmt.Sprint(i)))
	}
	res, err := n.Service().Propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_BATCH, Body: &pb.Command_Batch{Batch: &pb.BatchCmd{Commands: cmds}}})
	if err != nil || len(res.GetResults()) != 3 {
		t.Fatalf("batch on a base-level cluster: %v, %v", res, err)
	}
	// Every entry in the log is one a level-1 build applies: none is a Batch.
	first, last := uint64(1), n.Internals().Raft.LastIndex()
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := n.Internals().Logs.GetLog(i, &l); err != nil || l.Type != raft.LogCommand {
			continue
		}
		cmd, err := fsm.DecodeCommand(l.Data)
		if err != nil {
			t.Fatal(err)
		}
		if fsm.CommandLevel(cmd) > fsm.LevelBase {
			t.Fatalf("entry %d is %v, above the enabled level", i, cmd.GetType())
		}
	}
	if p, _, err := n.FSM().Counts("jobs", "default"); err != nil || p != callers {
		t.Fatalf("pending %d (%v), want %d", p, err, callers)
	}
}
