package main

import (
	"fmt"
	"time"

	metrics "github.com/armon/go-metrics"
	prommetrics "github.com/armon/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// bridgeRaftMetrics sends what hashicorp/raft and raft-boltdb measure
// through go-metrics (commit and apply times, replication, snapshot
// durations, BoltDB transactions) to reg, as docket_raft_*,
// docket_raft_boltdb_* and so on. go-metrics has one global sink per
// process, so this runs once, in the agent. A series no longer emitted
// drops out after a minute.
func bridgeRaftMetrics(reg prometheus.Registerer) error {
	sink, err := prommetrics.NewPrometheusSinkFrom(prommetrics.PrometheusOpts{Registerer: reg, Expiration: time.Minute})
	if err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	cfg := metrics.DefaultConfig("docket")
	cfg.EnableHostname = false       // a Prometheus target already has an instance label
	cfg.EnableRuntimeMetrics = false // the Go collector exports those
	cfg.EnableServiceLabel = false
	if _, err := metrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("raft metrics: %w", err)
	}
	return nil
}
