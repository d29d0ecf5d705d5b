package transport

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
)

// metrics are the server's Prometheus collectors. They always exist, so
// the code never checks; they are exported only when Config.Registerer is
// set.
type metrics struct {
	rpcs      *prometheus.CounterVec   // method, code
	latency   *prometheus.HistogramVec // method
	forwarded *prometheus.CounterVec   // method
	hbBatch   prometheus.Histogram
	coBatch   prometheus.Histogram
	waiters   prometheus.Gauge
	// undelivered and released count the tasks of claims whose answer
	// never reached the caller, and those put back without an attempt.
	undelivered prometheus.Counter
	released    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, log *slog.Logger) *metrics {
	m := &metrics{
		rpcs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "docket", Subsystem: "transport", Name: "rpcs_total",
			Help: "RPCs answered, by full method and gRPC code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "docket", Subsystem: "transport", Name: "rpc_seconds",
			Help:    "Time to answer an RPC, long polls included, by full method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"method"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "docket", Subsystem: "transport", Name: "forwarded_total",
			Help: "RPCs this follower forwarded to the leader, by full method.",
		}, []string{"method"}),
		hbBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "docket", Subsystem: "transport", Name: "heartbeat_batch_items",
			Help:    "Heartbeat items per proposed Heartbeat command.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 6),
		}),
		coBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "docket", Subsystem: "transport", Name: "coalesced_commands",
			Help:    "Client commands per proposed entry: 1 when proposed alone, more in a Batch.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 6),
		}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "docket", Subsystem: "transport", Name: "waiters",
			Help: "Long-poll Claim and WaitResult calls currently waiting.",
		}),
		undelivered: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "docket", Subsystem: "transport", Name: "claim_undelivered_tasks_total",
			Help: "Tasks claimed for a Claim whose caller was gone before the answer could be sent. " +
				"Leader-local: counted by the node that served the Claim, and reset by its restart.",
		}),
		released: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "docket", Subsystem: "transport", Name: "claim_released_tasks_total",
			Help: "Undelivered claimed tasks this leader put back to pending without counting an attempt. " +
				"Leader-local. The difference from claim_undelivered_tasks_total was reaped at lease expiry instead.",
		}),
	}
	if reg == nil {
		return m
	}
	for _, c := range []prometheus.Collector{m.rpcs, m.latency, m.forwarded, m.hbBatch, m.coBatch, m.waiters, m.undelivered, m.released} {
		if err := reg.Register(c); err != nil {
			// A second Server on one registry: its metrics stay local.
			log.Warn("transport metric not registered", "err", err)
		}
	}
	return m
}

func (m *metrics) observe(method string, code codes.Code, d time.Duration) {
	m.rpcs.WithLabelValues(method, code.String()).Inc()
	m.latency.WithLabelValues(method).Observe(d.Seconds())
}
