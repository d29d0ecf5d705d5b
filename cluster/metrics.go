package cluster

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// serviceMetrics are the Service's Prometheus collectors. They always
// exist, so the code never checks; they are exported only when
// ServiceConfig.Registerer is set.
type serviceMetrics struct {
	coBatch prometheus.Histogram
	waiters prometheus.Gauge
	// undelivered and released count the tasks of claims whose answer
	// never reached the caller, and those put back without an attempt.
	undelivered prometheus.Counter
	released    prometheus.Counter
}

func newServiceMetrics(reg prometheus.Registerer, log *slog.Logger) *serviceMetrics {
	m := &serviceMetrics{
		coBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "docket", Subsystem: "cluster", Name: "coalesced_commands",
			Help:    "Client commands per proposed entry: 1 when proposed alone, more in a Batch.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 6),
		}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "docket", Subsystem: "cluster", Name: "waiters",
			Help: "Long-poll Claim and WaitResult calls currently waiting.",
		}),
		undelivered: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "docket", Subsystem: "cluster", Name: "claim_undelivered_tasks_total",
			Help: "Tasks claimed for a Claim whose caller was gone before the answer could be sent. " +
				"Leader-local: counted by the node that served the Claim, and reset by its restart.",
		}),
		released: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "docket", Subsystem: "cluster", Name: "claim_released_tasks_total",
			Help: "Undelivered claimed tasks this leader put back to pending without counting an attempt. " +
				"Leader-local. The difference from claim_undelivered_tasks_total was reaped at lease expiry instead.",
		}),
	}
	if reg == nil {
		return m
	}
	for _, c := range []prometheus.Collector{m.coBatch, m.waiters, m.undelivered, m.released} {
		if err := reg.Register(c); err != nil {
			// A second Service on one registry (tests): its metrics stay local.
			log.Warn("cluster metric not registered", "err", err)
		}
	}
	return m
}
