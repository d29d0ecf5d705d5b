package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// runReport is what table reads of a report, NATS's or `docket bench`'s.
type runReport struct {
	Workload string `json:"workload"`
	Ops      []struct {
		Op       string  `json:"op"`
		ItemRate float64 `json:"items_per_sec"`
		P50Ms    float64 `json:"p50_ms"`
		P99Ms    float64 `json:"p99_ms"`
	} `json:"ops"`
	Ceiling *struct {
		ItemRate float64 `json:"items_per_sec"`
		P50Ms    float64 `json:"p50_ms"`
	} `json:"raft_ceiling"`
	Extra struct {
		// CPUPer1000 is the three nodes' CPU seconds per 1,000 items
		// (`docket bench` on its own local cluster only).
		CPUPer1000 float64 `json:"server_cpu_s_per_1000"`
	} `json:"extra"`
}

// headline is the op a workload is judged by: the tasks that finished, not
// the claims that fed them.
var headline = map[string]string{"drain": "submit", "cycle": "complete"}

// table prints, for each run name in dir (files r<round>-<name>.json, as
// sitting.sh writes them), the median over rounds of its headline rate and
// latencies, and of its raft ceiling when the run measured one. Medians,
// because one round on a shared 2-core box can be an outlier either way.
func table(dir string, w io.Writer) error {
	files, err := filepath.Glob(filepath.Join(dir, "r*-*.json"))
	if err != nil {
		return err
	}
	type sample struct{ rate, p50, p99, ceil, ceilP50, cpu float64 }
	runs := map[string][]sample{}
	var order []string
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		name = name[strings.Index(name, "-")+1:]
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r runReport
		if err := json.Unmarshal(b, &r); err != nil || len(r.Ops) == 0 {
			continue // a failed run: sitting.sh counted it
		}
		op := r.Ops[0]
		for _, o := range r.Ops {
			if o.Op == headline[r.Workload] {
				op = o
			}
		}
		s := sample{rate: op.ItemRate, p50: op.P50Ms, p99: op.P99Ms, cpu: r.Extra.CPUPer1000}
		if r.Ceiling != nil {
			s.ceil, s.ceilP50 = r.Ceiling.ItemRate, r.Ceiling.P50Ms
		}
		if _, ok := runs[name]; !ok {
			order = append(order, name)
		}
		runs[name] = append(runs[name], s)
	}
	if len(order) == 0 {
		return fmt.Errorf("table: no reports in %s", dir)
	}
	slices.Sort(order)
	fmt.Fprintf(w, "%-22s %6s %12s %19s %9s %9s %12s %9s %9s\n", "run", "rounds", "items/s", "(min-max)", "p50 ms", "p99 ms", "ceiling/s", "ceil p50", "cpu s/1k")
	for _, name := range order {
		ss := runs[name]
		med := func(f func(sample) float64) float64 {
			v := make([]float64, len(ss))
			for i, s := range ss {
				v[i] = f(s)
			}
			slices.Sort(v)
			if len(v)%2 == 1 {
				return v[len(v)/2]
			}
			return (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		lo, hi := ss[0].rate, ss[0].rate
		for _, s := range ss {
			lo, hi = min(lo, s.rate), max(hi, s.rate)
		}
		fmt.Fprintf(w, "%-22s %6d %12.1f %19s %9.3f %9.3f %12.1f %9.3f %9.3f\n", name, len(ss),
			med(func(s sample) float64 { return s.rate }), fmt.Sprintf("(%.0f-%.0f)", lo, hi), med(func(s sample) float64 { return s.p50 }),
			med(func(s sample) float64 { return s.p99 }), med(func(s sample) float64 { return s.ceil }),
			med(func(s sample) float64 { return s.ceilP50 }), med(func(s sample) float64 { return s.cpu }))
	}
	return nil
}
