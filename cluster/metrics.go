package cluster

import (
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockethq/docket/cluster/check"
	"github.com/dockethq/docket/cluster/health"
	"github.com/dockethq/docket/cluster/replica"
	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// maxQueueSeries bounds the queue/tenant pairs one scrape exports, so a
// tenant that creates queues without end cannot make /metrics unbounded;
// docket_queue_series_dropped says how many were left out.
const maxQueueSeries = 2000

// metricsCollector is the node's Prometheus collector. It exports what a
// scrape reads from the node at that moment: Raft's indexes and state, the
// FSM's applied index and latch, the consistency-check state and the queue
// depths from the replica's catalog counters (one key per queue and
// tenant, never a scan of tasks), the queues' pause flags and limits, and
// the tenants' schedules (a bounded scan of the schedule records). Every
// value is this node's view; the queue depths and totals are replicated
// state, the same on every node once it applied the same index. It never
// changes what it reads, and never exports an unbounded label set.
type metricsCollector struct {
	src metricsSource

	state, term, commit, applied, lastLog, fsmApplied, applyLag, leaderChangesD,
	voters, tolerance, level, buildLevel, check, hashing, queueTasks, queueDropped, oldest, leaseEnds *prometheus.Desc
	totals []queueTotal
	// Queue control: pause, limits, and the tenants' schedules.
	paused, queueLimit, tenantLimit, schedules *prometheus.Desc
	// Pebble and health.
	compactions, compactionsFailed, compactionDebt, l0Files, diskBytes, bgErrors, stalls, slowWrites, serving, snapBytes, manifestRepairs *prometheus.Desc
}

// queueTotal is one replicated lifetime counter of a queue.
type queueTotal struct {
	desc *prometheus.Desc
	get  func(*pb.QueueTotals) uint64
}

// metricsSource is what a scrape reads of the node, at that moment.
type metricsSource struct {
	Raft   *raft.Raft
	FSM    *fsm.FSM
	Clock  replica.Clock
	Health *health.Tracker
	// LeaderChanges counts the leader changes this node saw.
	LeaderChanges func() uint64
	// Status is the node's Cluster.Status answer, without a hash.
	Status func() *pb.StatusResponse
	// CheckState is the consistency check's state (check.State*).
	CheckState func() string
	// Hashing reports whether this node is hashing a check's view.
	Hashing func() bool
	// Serving reports whether the node can do its job (health SERVING).
	Serving func() bool
}

// newMetricsCollector returns the collector of the node src reads.
func newMetricsCollector(src metricsSource) *metricsCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("docket_"+name, help, labels, nil)
	}
	c := &metricsCollector{src: src,
		state:          d("raft_state", "1 for this node's Raft state (Leader, Follower, Candidate, Shutdown), 0 for the others.", "state"),
		term:           d("raft_term", "This node's current Raft term."),
		commit:         d("raft_commit_index", "The highest log index this node knows to be committed."),
		applied:        d("raft_applied_index", "The highest log index Raft handed to the FSM on this node."),
		lastLog:        d("raft_last_log_index", "The last index in this node's log."),
		fsmApplied:     d("fsm_applied_index", "The last index whose effects are in this node's keyspace."),
		applyLag:       d("fsm_apply_lag_entries", "Committed entries this node has not applied yet (commit index minus FSM applied index)."),
		leaderChangesD: d("raft_leader_changes_total", "Times this node saw the leader change (a new leader, or none), since it started."),
		voters:         d("raft_voters", "Voters in this node's latest Raft configuration."),
		tolerance: d("raft_failure_tolerance", "Voters that may fail before the cluster loses its quorum: voters alive in this "+
			"node's gossip minus the quorum of all voters; negative once the quorum is lost."),
		level:      d("feature_level_enabled", "The feature level the cluster latched, as this node applied it."),
		buildLevel: d("feature_level_build", "The highest feature level this node's build applies."),
		check: d("consistency_check_state", "1 for this node's consistency-check state (ok, awaiting, diverged), 0 for the others.",
			"state"),
		hashing: d("consistency_check_hashing", "1 while this node hashes its keyspace for a consistency check (paced by "+
			"--check-rate, at full speed for a new leader's first), 0 otherwise: what a check costs shows while it is 1."),
		queueTasks: d("queue_tasks", "Tasks by queue, tenant and state, from the replicated catalog counters. "+
			"waiting counts tasks waiting on their parents (task dependencies); "+
			"finished counts completed, failed and cancelled tasks kept until their retention ends.",
			"queue", "tenant", "state"),
		queueDropped: d("queue_series_dropped", "Queue/tenant pairs left out of docket_queue_tasks this scrape (more than the bound)."),
		oldest: d("queue_oldest_pending_age_seconds", "Age of the oldest task a worker would claim next, by this node's clock; absent when none is pending.",
			"queue", "tenant"),
		leaseEnds: d("lease_expirations_total", "Leases that ended without their worker, by reason, over every queue: expired "+
			"(the lease ran out and the leader reaped the task) or released (the claim's answer never reached the worker and "+
			"the leader put the task back). Replicated state from the queues' totals: every node reports the same count at "+
			"the same index; expired counted since feature level 5, released since level 6.", "reason"),
	}
	c.paused = d("queue_paused", "1 when the queue is paused (claims take nothing from it), 0 otherwise.", "queue", "tenant")
	c.queueLimit = d("queue_limit", "A queue's limit by kind, present only when set: max_running (tasks RUNNING at once), "+
		"rate_per_second (claimed tasks per second) and burst (the rate's bucket size).", "queue", "tenant", "kind")
	c.tenantLimit = d("tenant_limit", "A tenant's limit across its queues by kind, present only when set: max_running "+
		"(its tasks RUNNING at once). Reported for the tenants of the queues exported.", "tenant", "kind")
	c.schedules = d("schedules", fmt.Sprintf("Schedules (recurring tasks) by tenant; tenants without any are absent. "+
		"Counted over at most %d schedules per scrape.", maxScheduleScan), "tenant")
	c.compactions = d("pebble_compactions_total", "Compactions Pebble finished since the node started.")
	c.compactionsFailed = d("pebble_compactions_failed_total", "Compactions that failed since the node started.")
	c.manifestRepairs = d("pebble_manifest_repairs_total", "Opens since the node started that found the keyspace's MANIFEST damaged and started from the older state before the damage, replaying the Raft log from there.")
	c.compactionDebt = d("pebble_compaction_debt_bytes", "Bytes Pebble estimates it must compact; growing debt means compactions cannot keep up.")
	c.l0Files = d("pebble_l0_files", "Files in Pebble's level 0; many slow reads and, past Pebble's threshold, stall writes.")
	c.diskBytes = d("pebble_disk_bytes", "Bytes the keyspace takes on disk.")
	c.bgErrors = d("pebble_background_errors_total", "Background jobs (flushes, compactions) Pebble reported failed since start; a full disk makes this climb fast.")
	c.stalls = d("pebble_write_stalls_total", "Times Pebble stalled writes since start.")
	c.slowWrites = d("pebble_slow_writes_total", "Writes to a file Pebble reported slow since start.")
	c.snapBytes = d("fsm_snapshot_bytes", "Size of the last snapshot this node persisted (Raft's, or a backup); its duration is docket_raft_snapshot_persist.")
	c.serving = d("health_serving", "1 when the node can do its job (its health check says SERVING), 0 when a problem keeps it from it, it diverged, or it awaits a consistency check.")
	for _, t := range []struct {
		name, help string
		get        func(*pb.QueueTotals) uint64
	}{
		{"enqueued", "Tasks accepted by Enqueue.", (*pb.QueueTotals).GetEnqueued},
		{"claimed", "Pending tasks handed out by Claim.", (*pb.QueueTotals).GetClaimed},
		{"completed", "Tasks submitted as completed.", (*pb.QueueTotals).GetCompleted},
		{"failed", "Tasks submitted as failed (terminal).", (*pb.QueueTotals).GetFailed},
		{"cancelled", "Tasks ended by Cancel.", (*pb.QueueTotals).GetCancelled},
		{"dead_lettered", "Tasks moved to the dead letters.", (*pb.QueueTotals).GetDeadLettered},
		{"requeued", "Tasks back to pending or delayed from running (nack, expired lease, release) or from the dead letters.", (*pb.QueueTotals).GetRequeued},
		{"lease_expired", "Running tasks whose lease expired and the leader reaped.", (*pb.QueueTotals).GetLeaseExpired},
	} {
		c.totals = append(c.totals, queueTotal{get: t.get, desc: d("queue_"+t.name+"_total",
			t.help+" Replicated state: every node reports the same count at the same index; counted since the cluster enabled feature level 5.",
			"queue", "tenant")})
	}
	return c
}

// Describe sends every descriptor.
func (c *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.term, c.commit, c.applied, c.lastLog, c.fsmApplied, c.applyLag,
		c.leaderChangesD, c.voters, c.tolerance, c.level, c.buildLevel, c.check, c.hashing, c.queueTasks, c.queueDropped, c.oldest, c.leaseEnds,
		c.paused, c.queueLimit, c.tenantLimit, c.schedules} {
		ch <- d
	}
	for _, t := range c.totals {
		ch <- t.desc
	}
	for _, d := range []*prometheus.Desc{c.compactions, c.compactionsFailed, c.compactionDebt, c.l0Files, c.diskBytes,
		c.bgErrors, c.stalls, c.slowWrites, c.serving, c.snapBytes, c.manifestRepairs} {
		ch <- d
	}
}

// Collect reads the node now.
func (c *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.src
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	state := n.Raft.State()
	for _, s := range []raft.RaftState{raft.Leader, raft.Follower, raft.Candidate, raft.Shutdown} {
		gauge(c.state, b2f(state == s), s.String())
	}
	commit, fsmApplied := n.Raft.CommitIndex(), n.FSM.AppliedIndex()
	gauge(c.term, float64(n.Raft.CurrentTerm()))
	gauge(c.commit, float64(commit))
	gauge(c.applied, float64(n.Raft.AppliedIndex()))
	gauge(c.lastLog, float64(n.Raft.LastIndex()))
	gauge(c.fsmApplied, float64(fsmApplied))
	gauge(c.applyLag, float64(commit-min(commit, fsmApplied)))
	ch <- prometheus.MustNewConstMetric(c.leaderChangesD, prometheus.CounterValue, float64(n.LeaderChanges()))
	st := n.Status()
	voters := 0
	for _, s := range st.GetServers() {
		if s.GetSuffrage() == "voter" {
			voters++
		}
	}
	gauge(c.voters, float64(voters))
	gauge(c.tolerance, float64(st.GetFailureTolerance()))
	gauge(c.level, float64(n.FSM.EnabledLevel()))
	gauge(c.buildLevel, float64(n.FSM.MaxLevel()))
	cs := n.CheckState()
	for _, s := range []string{check.StateOK, check.StateAwaiting, check.StateDiverged} {
		gauge(c.check, b2f(cs == s), s)
	}
	if n.Hashing != nil {
		gauge(c.hashing, b2f(n.Hashing()))
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	if dm, err := n.FSM.DiskMetrics(); err != nil {
		ch <- prometheus.NewInvalidMetric(c.diskBytes, err)
	} else {
		counter(c.compactions, float64(dm.Compactions))
		counter(c.compactionsFailed, float64(dm.CompactionsFailed))
		counter(c.manifestRepairs, float64(dm.ManifestRepairs))
		gauge(c.compactionDebt, float64(dm.CompactionDebt))
		gauge(c.l0Files, float64(dm.L0Files))
		gauge(c.diskBytes, float64(dm.DiskBytes))
	}
	counter(c.bgErrors, float64(n.Health.BgErrors.Load()))
	counter(c.stalls, float64(n.Health.Stalls.Load()))
	counter(c.slowWrites, float64(n.Health.SlowWrites.Load()))
	gauge(c.serving, b2f(n.Serving()))
	gauge(c.snapBytes, float64(n.FSM.SnapshotBytes()))
	c.collectQueues(ch)
	c.collectSchedules(ch)
}

func (c *metricsCollector) collectQueues(ch chan<- prometheus.Metric) {
	now := c.src.Clock.Now().UnixNano()
	exported, dropped, cursor := 0, 0, ""
	// Summed over every queue, the dropped ones too: the reason series
	// have no queue label, so they stay two however many queues exist.
	var expired, released uint64
	tenants := map[string]bool{} // whose tenant limit is exported
	for {
		page, next, err := c.src.FSM.StatsPage("", "", cursor)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.queueTasks, err)
			return
		}
		for _, q := range page {
			expired += q.GetTotals().GetLeaseExpired()
			released += q.GetTotals().GetReleased()
			if exported >= maxQueueSeries {
				dropped++
				continue
			}
			exported++
			for state, v := range map[string]uint64{
				"pending": q.GetPending(), "delayed": q.GetDelayed(), "running": q.GetRunning(),
				"dead": q.GetDead(), "finished": q.GetCompleted(), "waiting": q.GetWaiting(),
			} {
				ch <- prometheus.MustNewConstMetric(c.queueTasks, prometheus.GaugeValue, float64(v), q.GetQueue(), q.GetTenant(), state)
			}
			c.collectControl(ch, q, tenants)
			if at := q.GetOldestPendingAt(); at > 0 {
				ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, float64(max(0, now-at))/1e9, q.GetQueue(), q.GetTenant())
			}
			if tt := q.GetTotals(); tt != nil {
				for _, t := range c.totals {
					ch <- prometheus.MustNewConstMetric(t.desc, prometheus.CounterValue, float64(t.get(tt)), q.GetQueue(), q.GetTenant())
				}
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	ch <- prometheus.MustNewConstMetric(c.queueDropped, prometheus.GaugeValue, float64(dropped))
	ch <- prometheus.MustNewConstMetric(c.leaseEnds, prometheus.CounterValue, float64(expired), "expired")
	ch <- prometheus.MustNewConstMetric(c.leaseEnds, prometheus.CounterValue, float64(released), "released")
}

// collectControl exports q's pause flag and the limits set on it and, once
// per tenant, on its tenant.
func (c *metricsCollector) collectControl(ch chan<- prometheus.Metric, q *pb.QueueStats, tenants map[string]bool) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.paused, b2f(q.GetPaused()), q.GetQueue(), q.GetTenant())
	if v := q.GetMaxRunning(); v > 0 {
		gauge(c.queueLimit, float64(v), q.GetQueue(), q.GetTenant(), "max_running")
	}
	if v := q.GetRateMilli(); v > 0 {
		gauge(c.queueLimit, float64(v)/1000, q.GetQueue(), q.GetTenant(), "rate_per_second")
	}
	if v := q.GetBurst(); v > 0 {
		gauge(c.queueLimit, float64(v), q.GetQueue(), q.GetTenant(), "burst")
	}
	if tenants[q.GetTenant()] {
		return
	}
	tenants[q.GetTenant()] = true
	if v := q.GetTenantMaxRunning(); v > 0 {
		gauge(c.tenantLimit, float64(v), q.GetTenant(), "max_running")
	}
}

// maxScheduleScan bounds the schedules one scrape reads to count them.
const maxScheduleScan = 100_000

// collectSchedules counts the schedules of each tenant, at most
// maxQueueSeries tenants and maxScheduleScan schedules.
func (c *metricsCollector) collectSchedules(ch chan<- prometheus.Metric) {
	const page = 1000
	counts := map[string]int{}
	var order []string // tenants in key order, for a stable export
	var after []byte
	for scanned := 0; scanned < maxScheduleScan; scanned += page {
		var err error
		after, err = c.src.FSM.ScanSchedules(after, page, func(s *pb.Schedule) error {
			if _, ok := counts[s.GetTenant()]; !ok {
				if len(order) >= maxQueueSeries {
					return nil
				}
				order = append(order, s.GetTenant())
			}
			counts[s.GetTenant()]++
			return nil
		})
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.schedules, err)
			return
		}
		if after == nil {
			break
		}
	}
	for _, tn := range order {
		ch <- prometheus.MustNewConstMetric(c.schedules, prometheus.GaugeValue, float64(counts[tn]), tn)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
