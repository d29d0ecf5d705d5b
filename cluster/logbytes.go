package cluster

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockethq/docket/cluster/raftlog"
)

// watchLogBytes keeps the Raft log within cfg.LogMaxBytes (or within
// raftlog.MinTrailingLogs entries, if those alone are larger). Every second it
// lowers TrailingLogs to the newest entries that fit in a quarter of the
// budget (never below raftlog.MinTrailingLogs, never above the configured value),
// and once the log is over the budget it takes a snapshot, which compacts
// the log down to those trailing entries. Entry-count snapshots go on as
// before; this only adds a trigger and trims what a snapshot keeps.
func (n *Node) watchLogBytes() {
	defer n.wg.Done()
	if n.cfg.LogMaxBytes == 0 {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			n.checkLogBytes()
		case <-n.ctx.Done():
			return
		}
	}
}

// logBytesGauge reports the Raft log's counted bytes, the number the
// budget watcher compares with --log-max-bytes.
func (n *Node) logBytesGauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "docket_raft_log_bytes",
		Help: "Bytes of the entries in this node's Raft log (data, extensions and a fixed per-entry overhead); kept under --log-max-bytes by snapshots."},
		func() float64 { return float64(n.store.Sizes().Bytes()) })
}

func (n *Node) checkLogBytes() {
	if n.LogFault() != nil {
		return // Raft is shut down; the store is not to be trusted
	}
	sizes := n.store.Sizes()
	trailing := min(n.cfg.TrailingLogs, max(raftlog.MinTrailingLogs, sizes.NewestWithin(n.cfg.LogMaxBytes/4)))
	rc := n.raft.ReloadableConfig()
	if rc.TrailingLogs != trailing {
		rc.TrailingLogs = trailing
		if err := n.raft.ReloadConfig(rc); err != nil {
			n.log.Warn("log byte budget: trailing logs not changed", "trailing_logs", trailing, "err", err)
			return
		}
	}
	size := sizes.Bytes()
	if size <= n.cfg.LogMaxBytes {
		return
	}
	start := time.Now()
	err := n.raft.Snapshot().Error()
	switch {
	case errors.Is(err, raft.ErrNothingNewToSnapshot):
		// Everything in the log is above the last snapshot but not yet
		// applied, or the log is all trailing entries: nothing to do.
	case err != nil:
		n.log.Warn("log byte budget: snapshot failed", "log_bytes", size, "budget", n.cfg.LogMaxBytes, "err", err)
	default:
		n.log.Info("log over its byte budget: snapshot taken", "log_bytes_before", size, "log_bytes_after", sizes.Bytes(),
			"budget", n.cfg.LogMaxBytes, "trailing_logs", trailing, "took", time.Since(start).Round(time.Millisecond))
	}
}
