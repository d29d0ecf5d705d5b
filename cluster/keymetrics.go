package cluster

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockethq/docket/fsm"
)

// The fair queues' metrics (feature level 16). A keyed queue may hold
// millions of keys, one per end customer, so no series is ever labelled
// with a key: the gauges rank a queue's top keys 1..topKeys and export
// their counts under the rank, which keeps each queue at a fixed number
// of series whatever its keys. The key itself is for `docket keys` and
// the dashboard (ListKeys).
const (
	// topKeys is how many keys of a queue the gauges rank.
	topKeys = 5
	// maxKeyedQueues bounds the queues one scrape ranks, like
	// maxQueueSeries: past it the queues are counted in
	// docket_queue_top_key_queues_dropped.
	maxKeyedQueues = 500
)

// keyMetricsCollector exports the top keys of every keyed queue, read from
// FSM.Keys at scrape time on the leader only: every replica holds the same
// keys, so one node's answer is the cluster's, a sum over the cluster's
// series counts each key once, and the followers skip the ranking.
type keyMetricsCollector struct {
	fsm      *fsm.FSM
	isLeader func() bool

	pending, running, keys, dropped *prometheus.Desc
}

func newKeyMetricsCollector(f *fsm.FSM, isLeader func() bool) *keyMetricsCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("docket_"+name, help, labels, nil)
	}
	return &keyMetricsCollector{fsm: f, isLeader: isLeader,
		pending: d("queue_top_key_pending", "Pending tasks of a keyed queue's keys with the largest backlogs, by rank "+
			"(1 the largest, up to "+strconv.Itoa(topKeys)+"); never labelled by key, so a queue has at most "+
			strconv.Itoa(topKeys)+" series. Exported by the leader only. docket keys QUEUE names the keys.", "queue", "tenant", "rank"),
		running: d("queue_top_key_running", "Running tasks of a keyed queue's keys with the most running, by rank "+
			"(1 the most, up to "+strconv.Itoa(topKeys)+"). Exported by the leader only.", "queue", "tenant", "rank"),
		keys: d("queue_active_keys", "Keys of a keyed queue with a pending or running task. Exported by the leader only.",
			"queue", "tenant"),
		dropped: d("queue_top_key_queues_dropped", "Keyed queues left out of the top-key gauges this scrape (more than "+
			strconv.Itoa(maxKeyedQueues)+"). Exported by the leader only."),
	}
}

// Describe sends every descriptor.
func (c *keyMetricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.running, c.keys, c.dropped} {
		ch <- d
	}
}

// Collect ranks the keys of each queue with work, on the leader.
func (c *keyMetricsCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.isLeader() {
		return
	}
	ranked, dropped, cursor := 0, 0, ""
	for {
		page, next, err := c.fsm.StatsPage("", "", cursor)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.pending, err)
			return
		}
		for _, q := range page {
			// A queue without pending or running tasks has no active key:
			// skip it without asking.
			if q.GetPending() == 0 && q.GetRunning() == 0 {
				continue
			}
			if ranked >= maxKeyedQueues {
				dropped++
				continue
			}
			ks, err := c.fsm.Keys(q.GetQueue(), q.GetTenant(), topKeys)
			if err != nil {
				ch <- prometheus.NewInvalidMetric(c.pending, err)
				return
			}
			if !ks.GetKeyed() {
				continue
			}
			ranked++
			labels := []string{q.GetQueue(), q.GetTenant()}
			ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(ks.GetKeys()), labels...)
			for i, k := range ks.GetByBacklog()[:min(topKeys, len(ks.GetByBacklog()))] {
				ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(k.GetPending()), append(labels, strconv.Itoa(i+1))...)
			}
			for i, k := range ks.GetByRunning()[:min(topKeys, len(ks.GetByRunning()))] {
				ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(k.GetRunning()), append(labels, strconv.Itoa(i+1))...)
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.GaugeValue, float64(dropped))
}
