package check_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/check"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// A leader proposes no Check while the cluster has not latched the
// check's feature level: a server on an older build would stop on the
// unknown command type during a rolling upgrade.
func Test_CheckWaitsForEveryVoterToSupportIt(t *testing.T) {
	n := nodetest.Start(t, nodetest.AtLevel(t, "n1", 1, fsm.LevelBatch))
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	nodes := []*cluster.Node{n}
	l := nodetest.LeaderOf(t, nodes)
	// The leader's first entries may still be applying: wait, or they
	// would look like a proposal.
	testwait.For(t, 5*time.Second, "the leader to apply its log", func() bool {
		return l.FSM().AppliedIndex() >= l.Internals().Raft.LastIndex()
	})
	before := l.FSM().AppliedIndex()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Internals().Checker.CheckOnce(ctx, false); !errors.Is(err, check.ErrChecksUnsupported) {
		t.Fatalf("check with unknown voters: %v, want check.ErrChecksUnsupported", err)
	}
	if got := l.FSM().AppliedIndex(); got != before {
		t.Fatalf("applied index moved from %d to %d: something was proposed", before, got)
	}
}

// A paced hash that outlasts CheckTimeout still gets its check recorded:
// the leader's wait for the voters' hashes counts from the end of its
// own, which runs at the same pace as theirs. Before, the leader gave up
// CheckTimeout after proposing and recorded nothing, so a keyspace larger
// than CheckRate x CheckTimeout was never checked. One voter is enough to
// show it: its own hash is the majority (peers answer over gRPC, which
// transport's tests have).
func Test_CheckPacedPastTimeoutIsRecorded(t *testing.T) {
	nodes := nodetest.ClusterWith(t, 1, func(c *cluster.Config) {
		c.CheckInterval = -1 // checks run by hand below
		c.CheckTimeout = 200 * time.Millisecond
		c.CheckRate = 2 << 20 // bytes a second: about a second for this keyspace
	})
	l := nodetest.LeaderOf(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	payload := strings.Repeat("x", 128<<10)
	for i := 0; i < 20; i++ { // 2.5 MiB of payloads
		if _, err := l.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", payload)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := l.Internals().Checker.CheckOnce(ctx, false); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	st := l.Internals().Checker.Status()
	if st.GetIndex() == 0 || st.GetMajorityHash() == "" {
		t.Fatalf("no check recorded after %v: %v", took, st)
	}
	if took < 500*time.Millisecond {
		t.Fatalf("the check took %v: the hash was not paced", took)
	}
	if st.GetOwnHash() != st.GetMajorityHash() {
		t.Fatalf("leader's own hash %s, majority %s", st.GetOwnHash(), st.GetMajorityHash())
	}
}

// An urgent check (a new leader's first, one a restarted voter asks for)
// does not wait behind a paced hash of an earlier check: that hash gives
// way, and the urgent one runs at full speed. Before, a check arriving
// while a hash ran was skipped, and with a paced hash running most of each
// CheckInterval a restarted voter would wait a whole interval or more.
func Test_CheckUrgentReplacesPacedHash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nodes := pacedCluster(t, ctx, 1, func(c *cluster.Config) { c.CheckTimeout = 200 * time.Millisecond })
	l := nodetest.LeaderOf(t, nodes)
	paced := make(chan error, 1)
	go func() { paced <- l.Internals().Checker.CheckOnce(ctx, false) }()
	testwait.For(t, 5*time.Second, "the paced hash to start", func() bool {
		return l.Internals().Checker.Hashing()
	})
	if err := l.Internals().Checker.CheckOnce(ctx, true); err != nil {
		t.Fatalf("urgent check: %v", err)
	}
	st := l.Internals().Checker.Status()
	if st.GetMajorityHash() == "" || st.GetOwnHash() != st.GetMajorityHash() {
		t.Fatalf("urgent check not recorded: %v", st)
	}
	if err := <-paced; err != nil {
		t.Fatalf("paced check: %v", err)
	}
}

// Test_UrgentCheckIsFullSpeedOnEveryVoter: the leader marks an urgent
// check in its entry, and every voter, not only the leader, hashes it at
// full speed. In a 5-node cluster the leader and a restarted voter are no
// majority: a third voter's paced hash (about 40 s here) would hold the
// restarted voter out of service.
func Test_UrgentCheckIsFullSpeedOnEveryVoter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nodes := pacedCluster(t, ctx, 3, func(*cluster.Config) {})
	l := nodetest.LeaderOf(t, nodes)
	check := func(urgent bool) uint64 {
		t.Helper()
		res, err := l.Internals().Propose(ctx, &pb.Command{Type: pb.CommandType_COMMAND_TYPE_CHECK, Body: &pb.Command_Check{Check: &pb.CheckCmd{Urgent: urgent}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetIndex()
	}
	// The control: a periodic check is paced on every voter (about 40 s).
	paced := check(false)
	for _, n := range nodes {
		testwait.For(t, 5*time.Second, n.ID()+"'s paced hash to start", func() bool { return n.Internals().Checker.HashPending(paced) })
	}
	index := check(true)
	for _, n := range nodes {
		testwait.For(t, 8*time.Second, n.ID()+"'s hash of the urgent check", func() bool { return n.CheckHash(index) != "" })
	}
	if a, b, c := nodes[0].CheckHash(index), nodes[1].CheckHash(index), nodes[2].CheckHash(index); a != b || b != c {
		t.Fatalf("voters' hashes differ: %s %s %s", a, b, c)
	}
	for _, n := range nodes {
		if n.CheckHash(paced) != "" {
			t.Fatalf("%s finished the paced hash: the pace did not hold it", n.ID())
		}
	}
}

// pacedCluster is a cluster of size nodes whose checks run only by hand
// and hash at 64 KiB/s, holding 2.5 MiB of tasks: a paced hash takes about
// 40 s, a full-speed one milliseconds.
func pacedCluster(t *testing.T, ctx context.Context, size int, edit func(*cluster.Config)) []*cluster.Node {
	t.Helper()
	nodes := nodetest.ClusterWith(t, size, func(c *cluster.Config) {
		c.CheckInterval = -1
		c.CheckRate = 64 << 10
		edit(c)
	})
	l := nodetest.LeaderOf(t, nodes)
	payload := strings.Repeat("x", 128<<10)
	for i := 0; i < 20; i++ {
		if _, err := l.Service().Propose(ctx, nodetest.EnqueueCmd("jobs", payload)); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// docket_consistency_check_hashing is 1 exactly while the node hashes: an
// operator (and `docket bench --workload backlog --during-check`) reads
// what a check costs from the time it is 1.
func Test_CheckHashingGauge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reg := prometheus.NewRegistry()
	nodes := pacedCluster(t, ctx, 1, func(c *cluster.Config) {
		c.CheckTimeout = 200 * time.Millisecond
		c.Service.Registerer = reg
	})
	l := nodetest.LeaderOf(t, nodes)
	if got, ok := nodetest.MetricValue(t, reg, "docket_consistency_check_hashing"); !ok || got != 0 {
		t.Fatalf("hashing gauge %v (present %v) before any check, want 0", got, ok)
	}
	paced := make(chan error, 1)
	go func() { paced <- l.Internals().Checker.CheckOnce(ctx, false) }()
	testwait.For(t, 5*time.Second, "the paced hash to start", l.Internals().Checker.Hashing)
	if got, _ := nodetest.MetricValue(t, reg, "docket_consistency_check_hashing"); got != 1 {
		t.Fatalf("hashing gauge %v while a paced hash runs, want 1", got)
	}
	if err := l.Internals().Checker.CheckOnce(ctx, true); err != nil { // the paced hash gives way
		t.Fatalf("urgent check: %v", err)
	}
	if err := <-paced; err != nil {
		t.Fatalf("paced check: %v", err)
	}
	testwait.For(t, 5*time.Second, "the gauge back at 0", func() bool {
		got, _ := nodetest.MetricValue(t, reg, "docket_consistency_check_hashing")
		return got == 0
	})
}
