package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrMemoryLimit means this node's memory is at its bound
// (ServiceConfig.MemoryLimit): it refuses new work (Enqueue) until
// workers finish tasks and memory falls. Nothing of the refused request
// was stored; retry later, or on a node with room. Errors carrying it are
// *MemoryLimitError.
var ErrMemoryLimit = errors.New("node at its memory limit")

// MemoryLimitError is ErrMemoryLimit with the numbers: the limit, the
// use that was sampled, and the use from which new work is refused.
type MemoryLimitError struct {
	Limit, Use, RefuseAt uint64
}

func (e *MemoryLimitError) Error() string {
	return fmt.Sprintf("node at its memory limit: it uses %s of --memory-limit %s and refuses new tasks from %s; "+
		"nothing was stored: retry once workers have drained tasks, or raise the limit", mib(e.Use), mib(e.Limit), mib(e.RefuseAt))
}

// Is makes errors.Is(err, ErrMemoryLimit) true.
func (e *MemoryLimitError) Is(target error) bool { return target == ErrMemoryLimit }

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// MemoryRefuseFraction is the share of the memory limit from which a node
// refuses new work. The tenth above it is room for what is already on its
// way: requests being admitted between two samples, entries other nodes
// proposed (a follower applies every entry, refused or not), claims and
// answers, and garbage the collector has not returned yet.
const MemoryRefuseFraction = 0.9

// MemorySampleInterval is how often the guard reads the process's memory:
// runtime/metrics (no stop-the-world, unlike runtime.ReadMemStats) and one
// read of /proc/self/statm, about 26 µs on the benchmark VM
// (BenchmarkMemorySample), so under 0.03 % of a core. Admitting a request
// reads only an atomic.
const MemorySampleInterval = 100 * time.Millisecond

// memGuard refuses new work once the process's memory reaches the refuse
// mark. It is nil when no limit is set.
type memGuard struct {
	limit, refuseAt uint64
	use             atomic.Uint64
	refusing        atomic.Bool
	log             *slog.Logger
	samples         []metrics.Sample
	refused         prometheus.Counter
	useGauge        prometheus.Gauge
}

// newMemGuard returns the guard of limit bytes, or nil for no limit.
func newMemGuard(limit uint64, reg prometheus.Registerer, log *slog.Logger) *memGuard {
	if limit == 0 {
		return nil
	}
	g := &memGuard{limit: limit, refuseAt: uint64(float64(limit) * MemoryRefuseFraction), log: log, samples: memSamples(),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "docket", Subsystem: "memory", Name: "refused_total",
			Help: "Requests for new work (Enqueue) this node refused because its memory was at --memory-limit.",
		}),
		useGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "docket", Subsystem: "memory", Name: "use_bytes",
			Help: "The process's memory as the --memory-limit guard last sampled it: the larger of the Go runtime's " +
				"mapped memory and the resident set.",
		}),
	}
	limitGauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "docket", Subsystem: "memory", Name: "limit_bytes",
		Help: "--memory-limit: from 90 % of it the node refuses new work.",
	})
	limitGauge.Set(float64(limit))
	if reg != nil {
		for _, c := range []prometheus.Collector{g.refused, g.useGauge, limitGauge} {
			if err := reg.Register(c); err != nil {
				log.Warn("memory metric not registered", "err", err) // a second Service on one registry (tests)
			}
		}
	}
	g.sample()
	return g
}

// run samples until ctx ends.
func (g *memGuard) run(ctx context.Context) {
	t := time.NewTicker(MemorySampleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.sample()
		}
	}
}

// sample reads the process's memory once, and logs when refusing starts
// or ends.
func (g *memGuard) sample() {
	use := readUse(g.samples)
	g.use.Store(use)
	g.useGauge.Set(float64(use))
	refusing := use >= g.refuseAt
	if g.refusing.Swap(refusing) != refusing {
		if refusing {
			g.log.Warn("memory at its limit: refusing new tasks until it falls", "use", use, "refuse_at", g.refuseAt, "limit", g.limit)
		} else {
			g.log.Info("memory below its limit again: taking new tasks", "use", use, "refuse_at", g.refuseAt, "limit", g.limit)
		}
	}
}

// check answers *MemoryLimitError while the last sample was at or above
// the refuse mark.
func (g *memGuard) check() error {
	if g == nil || !g.refusing.Load() {
		return nil
	}
	g.refused.Inc()
	return &MemoryLimitError{Limit: g.limit, Use: g.use.Load(), RefuseAt: g.refuseAt}
}

// memSamples are the runtime/metrics the guard reads: what the Go runtime
// has mapped, less what it returned to the OS. It is the measure
// debug.SetMemoryLimit bounds.
func memSamples() []metrics.Sample {
	return []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
}

// readUse is the larger of the Go runtime's memory (s, from memSamples)
// and the resident set.
func readUse(s []metrics.Sample) uint64 {
	metrics.Read(s)
	use := uint64(0)
	if s[0].Value.Kind() == metrics.KindUint64 && s[1].Value.Kind() == metrics.KindUint64 {
		use = s[0].Value.Uint64() - s[1].Value.Uint64()
	}
	return max(use, ResidentBytes())
}

// ResidentBytes is the process's resident set from /proc/self/statm, or 0
// where there is none. It counts what the Go runtime does not: Pebble's
// block cache and memtables live in C memory in cgo builds.
func ResidentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// MemoryInUse is the process's memory as the guard measures it: the
// larger of the Go runtime's mapped memory (what debug.SetMemoryLimit
// governs) and the resident set.
func MemoryInUse() uint64 { return readUse(memSamples()) }
