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
// family that raft itself emits. The replication timings carry the peer as
// a label, and no name carries it (NoLegacyTelemetry).
func Test_RaftMetricsBridged(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := bridgeRaftMetrics(reg); err != nil {
		t.Fatal(err)
	}
	nodes := startCluster(t, 3, nil)
	docket(t, strings.Join(addrsOf(nodes), ","), "enqueue", "jobs", "x")
	const rpc = "docket_raft_replication_appendEntries_rpc"
	testwait.Until(t, 10*time.Second, "raft's own metrics", func() string {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{"docket_raft_commitTime": false, "docket_raft_fsm_applyBatch": false, rpc: false}
		for _, f := range fams {
			if strings.HasPrefix(f.GetName(), rpc+"_") {
				t.Fatalf("a legacy per-peer series: %s", f.GetName())
			}
			if _, ok := want[f.GetName()]; !ok {
				continue
			}
			want[f.GetName()] = f.GetName() != rpc || len(f.GetMetric()) > 0 && len(f.GetMetric()[0].GetLabel()) > 0 &&
				f.GetMetric()[0].GetLabel()[0].GetName() == "peer_id"
		}
		for name, ok := range want {
			if !ok {
				return "no " + name + " (with a peer_id label for the replication's)"
			}
		}
		return ""
	})
}
