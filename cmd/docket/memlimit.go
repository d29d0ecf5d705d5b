package main

import (
	"flag"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/dockethq/docket/cluster/service"
)

// memoryLimitFlag binds --memory-limit to limit (cluster/service's
// ServiceConfig.MemoryLimit).
func memoryLimitFlag(fs *flag.FlagSet, limit *uint64) {
	fs.Func("memory-limit", "bound the node's memory (bytes, or with KiB, MiB, GiB): from 90 % of it, Enqueue is refused "+
		"with ResourceExhausted/MEMORY_LIMIT (nothing stored; claims, heartbeats, submits and nacks still run), and the "+
		"Go runtime's soft limit is set there; size it to the container's limit less what else runs in it (default: none)",
		func(v string) error {
			n, err := parseBytes(v)
			*limit = n
			return err
		})
}

// parseBytes reads "512MiB", "2GiB", "64KiB" or a plain count of bytes.
func parseBytes(v string) (uint64, error) {
	s := strings.TrimSpace(v)
	mult := uint64(1)
	for suffix, m := range map[string]uint64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, suffix)), m
			break
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: want bytes, or a number with KiB, MiB, GiB or TiB", v)
	}
	if n > (1<<63-1)/mult {
		return 0, fmt.Errorf("%q: too large", v)
	}
	return n * mult, nil
}

// applyMemoryLimit sets the Go runtime's soft memory limit to the point
// where the node starts refusing work, so the collector works harder as
// the heap nears it and garbage is returned before live state is refused
// for. The limit is the process's: only the agent, which owns it, sets it.
func applyMemoryLimit(limit uint64, log *slog.Logger) {
	if limit == 0 {
		return
	}
	soft := int64(float64(limit) * service.MemoryRefuseFraction)
	debug.SetMemoryLimit(soft)
	log.Info("memory limit", "limit", limit, "refuse_and_go_soft_limit", soft)
}
