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
	}
	if reg == nil {
		return m
	}
	for _, c := range []prometheus.Collector{m.rpcs, m.latency, m.forwarded} {
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
