package main

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockethq/docket/internal/testwait"
)

// Test_RaftMetricsBridged: what hashicorp/raft measures through go-metrics
// reaches the agent's registry ("hashicorp/raft's go-metrics
// bridged in"). Before the bridge the registry held no docket_raft_*
// family that raft itself emits.
func Test_RaftMetricsBridged(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := bridgeRaftMetrics(reg); err != nil {
		t.Fatal(err)
	}
	nodes := startCluster(t, 1, nil)
	docket(t, strings.Join(addrsOf(nodes), ","), "enqueue", "jobs", "x")
	testwait.For(t, 10*time.Second, "raft's own metrics", func() bool {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if strings.HasPrefix(f.GetName(), "docket_raft_commitTime") || strings.HasPrefix(f.GetName(), "docket_raft_fsm_apply") {
				return true
			}
		}
		return false
	})
}
