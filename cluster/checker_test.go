package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dockethq/docket/fsm"
)

// A leader proposes no Check while the cluster has not latched the
// check's feature level: a server on an older build would stop on the
// unknown command type during a rolling upgrade.
func Test_CheckWaitsForEveryVoterToSupportIt(t *testing.T) {
	n := mustNode(t, atLevel(t, "n1", 1, fsm.LevelBatch))
	waitFor(t, 5*time.Second, "n1 leader", n.IsLeader)
	nodes := []*Node{n}
	l := leaderOf(t, nodes)
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
