package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A leader proposes no Check while a voter has not shown (by gossiping
// its feature level) that its build applies Check entries: an older build
// would stop on the unknown command type during a rolling upgrade.
func Test_CheckWaitsForEveryVoterToSupportIt(t *testing.T) {
	// The voters join Raft but not the leader's gossip pool: the leader
	// never learns their feature level, as with an older build.
	l := mustNode(t, testConfig(t, "n1", 1))
	waitFor(t, 5*time.Second, "n1 leader", l.IsLeader)
	for _, id := range []string{"n2", "n3"} {
		n := mustNode(t, testConfig(t, id, 0))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := l.AddServer(ctx, n.ID(), n.cfg.RaftAddr, "", false)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	before := l.FSM().AppliedIndex()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.checkOnce(ctx); !errors.Is(err, errChecksUnsupported) {
		t.Fatalf("check with unknown voters: %v, want errChecksUnsupported", err)
	}
	if got := l.FSM().AppliedIndex(); got != before {
		t.Fatalf("applied index moved from %d to %d: something was proposed", before, got)
	}
}
