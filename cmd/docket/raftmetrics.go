package main

import (
	"fmt"
	"time"

	metrics "github.com/armon/go-metrics"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockethq/docket/internal/gometrics"
)

// bridgeRaftMetrics sends what hashicorp/raft and raft-boltdb measure
// through go-metrics (commit and apply times, replication, snapshot
// durations, BoltDB transactions) to reg, as docket_raft_*,
// docket_raft_boltdb_* and so on. go-metrics has one global sink per
// process, so this runs once, in the agent. A series no longer emitted
// drops out after a minute. The sink is internal/gometrics, not
// go-metrics' own Prometheus sink: the same series at a fraction of the
// cost raft pays on every entry.
//
// The Raft transport's own timings (raft.net.*: decoding, queueing and
// answering each RPC) are not exported: four summaries per AppendEntries
// on a follower, that say less than the replication timings the leader
// exports (docket_raft_replication_appendEntries_rpc, by peer).
func bridgeRaftMetrics(reg prometheus.Registerer) error {
	sink := gometrics.NewSink("docket", time.Minute, []string{"raft", "net"})
	if err := reg.Register(sink); err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	// No service name: the sink prefixes it, so go-metrics does not copy
	// every key to prepend it.
	cfg := metrics.DefaultConfig("")
	cfg.EnableHostname = false       // a Prometheus target already has an instance label
	cfg.EnableRuntimeMetrics = false // the Go collector exports those
	cfg.EnableServiceLabel = false
	if _, err := metrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	return nil
}
