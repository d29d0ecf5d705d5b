package service

import (
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// fencedCommands are the commands whose items can be refused STALE_FENCE:
// the label values of docket_lease_stale_fence_total.
var fencedCommands = []pb.CommandType{
	pb.CommandType_COMMAND_TYPE_HEARTBEAT, pb.CommandType_COMMAND_TYPE_SUBMIT, pb.CommandType_COMMAND_TYPE_NACK,
	pb.CommandType_COMMAND_TYPE_SNOOZE, pb.CommandType_COMMAND_TYPE_REAP, pb.CommandType_COMMAND_TYPE_RELEASE,
	pb.CommandType_COMMAND_TYPE_TIME_OUT,
}

// opName is a command type's label value: "SUBMIT".
func opName(t pb.CommandType) string { return strings.TrimPrefix(t.String(), "COMMAND_TYPE_") }

// heldOutcomes are the label values of docket_lease_claim_to_answer_seconds.
var heldOutcomes = []string{"completed", "failed", "nack"}

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
	// staleFence and heartbeats count answers of the commands this node
	// proposed as leader, by command type.
	staleFence *prometheus.CounterVec
	heartbeats prometheus.Counter
	// held is claim-to-answer time by outcome; renewal the gap between a
	// lease's renewals.
	held    *prometheus.HistogramVec
	renewal prometheus.Histogram
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
		staleFence: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "docket", Subsystem: "lease", Name: "stale_fence_total",
			Help: "Items refused with STALE_FENCE (a fence that no longer holds the task), by command, also inside batches. " +
				"Leader-local: counted by the node that proposed the command.",
		}, []string{"command"}),
		heartbeats: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "docket", Subsystem: "lease", Name: "heartbeats_total",
			Help: "Leases renewed by Heartbeat. Leader-local.",
		}),
		held: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "docket", Subsystem: "lease", Name: "claim_to_answer_seconds",
			Help: "Time from a task's claim to its worker's accepted Submit (outcome completed or failed) or Nack, " +
				"by the leader's clock. Leader-local.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 10), // 5 ms .. about 22 min
		}, []string{"outcome"}),
		renewal: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "docket", Subsystem: "lease", Name: "renewal_gap_seconds",
			Help: "Time between a lease's renewals (claim or heartbeat to the next heartbeat); close to the lease means " +
				"workers renew late. Leader-local.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14), // 10 ms .. about 80 s
		}),
	}
	// Every label value known in advance exists from the start at 0, on
	// every node: a series that appears only with its first event (and only
	// on the node that led then) leaves rate() and alerts blind until then.
	for _, op := range fencedCommands {
		m.staleFence.WithLabelValues(opName(op))
	}
	for _, o := range heldOutcomes {
		m.held.WithLabelValues(o)
	}
	if reg == nil {
		return m
	}
	for _, c := range []prometheus.Collector{m.coBatch, m.waiters, m.undelivered, m.released, m.staleFence, m.heartbeats, m.held, m.renewal} {
		if err := reg.Register(c); err != nil {
			// A second Service on one registry (tests): its metrics stay local.
			log.Warn("cluster metric not registered", "err", err)
		}
	}
	return m
}

// observe counts the answers of one applied command.
func (m *serviceMetrics) observe(cmd *pb.Command, res *pb.CommandResult) {
	if subs := cmd.GetBatch().GetCommands(); len(subs) > 0 {
		for i, sub := range subs {
			if i < len(res.GetResults()) {
				m.observe(sub, res.GetResults()[i])
			}
		}
		return
	}
	op := opName(cmd.GetType())
	for _, it := range res.GetItems() {
		switch {
		case it.GetCode() == pb.Code_CODE_STALE_FENCE:
			m.staleFence.WithLabelValues(op).Inc()
		case it.GetCode() != pb.Code_CODE_OK:
		case cmd.GetType() == pb.CommandType_COMMAND_TYPE_HEARTBEAT:
			m.heartbeats.Inc()
			m.renewal.Observe(float64(it.GetSinceNs()) / 1e9)
		case cmd.GetType() == pb.CommandType_COMMAND_TYPE_SUBMIT:
			outcome := "completed"
			if cmd.GetSubmit().GetOutcome() == pb.Outcome_OUTCOME_FAILED {
				outcome = "failed"
			}
			m.held.WithLabelValues(outcome).Observe(float64(it.GetSinceNs()) / 1e9)
		case cmd.GetType() == pb.CommandType_COMMAND_TYPE_NACK:
			m.held.WithLabelValues("nack").Observe(float64(it.GetSinceNs()) / 1e9)
		}
	}
}
