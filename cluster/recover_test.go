package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/internal/testaddr"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_RecoverAfterMajorityLoss is the documented recovery for the
// loss of a majority: two of three servers are gone for good, the
// survivor cannot elect itself, and after the operator writes
// cluster.RecoveryFile it leads alone with every acknowledged task, takes writes,
// and does not recover again on its next start.
func Test_RecoverAfterMajorityLoss(t *testing.T) {
	cfg := nodetest.Config(t, "n1", 1)
	cfg.RaftAddr = testaddr.Free(t)
	n1 := nodetest.Start(t, cfg)
	testwait.For(t, 5*time.Second, "n1 leader", n1.IsLeader)
	nodes := []*cluster.Node{n1}
	for _, id := range []string{"n2", "n3"} {
		n := nodetest.Start(t, nodetest.Config(t, id, 0))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := n1.AddServer(ctx, id, n.Internals().Config.RaftAddr, "", false)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const tasks = 20
	for i := range tasks {
		if res, err := nodetest.LeaderOf(t, nodes).Service().Propose(ctx, nodetest.EnqueueCmd("jobs", fmt.Sprint(i))); err != nil || pb.ResultError(res) != nil {
			t.Fatalf("enqueue %d: %v %v", i, res, err)
		}
	}
	for _, n := range nodes {
		if err := n.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// n1 alone, without recovery: it is one of three voters and can
	// never win an election.
	cfg.BootstrapExpect = 0
	alone := nodetest.Start(t, cfg)
	// Watched over several election timeouts: a negative has no state
	// to wait for, only a window in which it must not happen.
	deadline := time.Now().Add(5 * cfg.ElectionTimeout)
	for time.Now().Before(deadline) {
		if alone.IsLeader() {
			t.Fatal("a single survivor of three voters became leader without recovery")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := alone.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// A recovery file that leaves the node out is refused, and kept.
	path := filepath.Join(cfg.DataDir, cluster.RecoveryFile)
	if err := os.WriteFile(path, []byte(`[{"id":"n2","address":"127.0.0.1:1","non_voter":false}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.New(cfg); err == nil || !strings.Contains(err.Error(), "does not list this server") {
		t.Fatalf("recovery without this server: %v", err)
	}
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`[{"id":"n1","address":%q,"non_voter":false}]`, cfg.RaftAddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := nodetest.Start(t, cfg)
	testwait.For(t, 10*time.Second, "the recovered node to lead", rec.IsLeader)
	if p, _, err := rec.FSM().Counts("jobs", "default"); err != nil || p != tasks {
		t.Fatalf("after recovery: %d pending (%v), want %d", p, err, tasks)
	}
	if res, err := rec.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", "after")); err != nil || pb.ResultError(res) != nil {
		t.Fatalf("write after recovery: %v %v", res, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still there after recovery: %v", path, err)
	}
	if _, err := os.Stat(path + ".done"); err != nil {
		t.Fatalf("no %s.done: %v", cluster.RecoveryFile, err)
	}
	st := rec.Status()
	if len(st.GetServers()) != 1 || st.GetServers()[0].GetId() != "n1" {
		t.Fatalf("configuration after recovery: %v", st.GetServers())
	}
}
