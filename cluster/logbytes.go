package cluster

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// watchLogBytes samples what the Raft log takes on disk every second and
// keeps the log within cfg.LogMaxBytes (raftlog.Store.CheckBudget): it
// lowers TrailingLogs to what the budget leaves (never above the
// configured value), and once the log's entries or its files are over the
// budget it takes a snapshot, which compacts the log down to those
// trailing entries. Entry-count snapshots go on as before; this only adds
// a trigger and trims what a snapshot keeps.
func (n *Node) watchLogBytes() {
	defer n.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		n.checkLogBytes()
		select {
		case <-t.C:
		case <-n.ctx.Done():
			return
		}
	}
}

// logBytesGauges report the Raft log's counted bytes (the number the
// budget watcher compares with --log-max-bytes), its files' bytes on disk
// as last sampled, and the budget itself, so an alert can compare them.
func (n *Node) logBytesGauges() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "docket_raft_log_bytes",
			Help: "Bytes of the entries in this node's Raft log (data, extensions and a fixed per-entry overhead); kept under --log-max-bytes by snapshots."},
			func() float64 { return float64(n.store.Sizes().Bytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "docket_raft_log_disk_bytes",
			Help: "Bytes the Raft log's files hold on disk (raft-wal's preallocated segments count whole), sampled every second; kept under --log-max-bytes by snapshots."},
			func() float64 { return float64(n.logDiskBytes.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "docket_raft_log_max_bytes",
			Help: "The Raft log's byte budget, --log-max-bytes (0: none)."},
			func() float64 { return float64(n.cfg.LogMaxBytes) }),
	}
}

func (n *Node) checkLogBytes() {
	if n.LogFault() != nil {
		return // Raft is shut down; the store is not to be trusted
	}
	budget := n.cfg.LogMaxBytes
	b, err := n.store.CheckBudget(max(budget, 1), n.cfg.TrailingLogs)
	if err != nil {
		n.log.Warn("log byte budget: cannot read the log's size", "err", err)
		return
	}
	n.logDiskBytes.Store(b.DiskBytes)
	if budget == 0 {
		return
	}
	rc := n.raft.ReloadableConfig()
	if rc.TrailingLogs != b.Trailing {
		rc.TrailingLogs = b.Trailing
		if err := n.raft.ReloadConfig(rc); err != nil {
			n.log.Warn("log byte budget: trailing logs not changed", "trailing_logs", b.Trailing, "err", err)
			return
		}
	}
	if !b.Over {
		return
	}
	start := time.Now()
	err = n.raft.Snapshot().Error()
	switch {
	case errors.Is(err, raft.ErrNothingNewToSnapshot):
		// Everything in the log is above the last snapshot but not yet
		// applied, or the log is all trailing entries: nothing to do.
	case err != nil:
		n.log.Warn("log byte budget: snapshot failed", "log_bytes", b.EntryBytes, "disk_bytes", b.DiskBytes, "budget", budget, "err", err)
	default:
		after, _ := n.store.DiskUse()
		n.log.Info("log over its byte budget: snapshot taken", "log_bytes_before", b.EntryBytes, "log_bytes_after", n.store.Sizes().Bytes(),
			"disk_bytes_before", b.DiskBytes, "disk_bytes_after", after.Bytes,
			"budget", budget, "trailing_logs", b.Trailing, "took", time.Since(start).Round(time.Millisecond))
	}
}
