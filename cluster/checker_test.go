package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A leader proposes no Check while a voter has not shown (in its Status)
// that its build applies Check entries: an older build would stop on the
// unknown command type during a rolling upgrade.
func Test_CheckWaitsForEveryVoterToSupportIt(t *testing.T) {
	nodes := mustCluster(t, 3) // no gRPC here: no voter ever answered a Status
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
