package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Pairs (--pairs N --agent-exe-b B): the same workload against two server
// builds, by turns, under this one load generator. A 2-core box drifts by
// more between minutes than most changes are worth, and which run of a
// pair goes first moves its reading, one way or the other (BENCHMARKS.md),
// so the builds alternate which runs first, and each pair is read as a
// ratio.

// pairRun is what one run of a pair contributes.
type pairRun struct {
	Rate      float64 `json:"tasks_per_s"`
	CPUPer1k  float64 `json:"server_cpu_s_per_1000"`
	P50Ms     float64 `json:"p50_ms"`
	LoadStart string  `json:"load_start"`
}

// PairResult is one pair: build A's run and build B's, and B ÷ A.
type PairResult struct {
	Pair      int     `json:"pair"`
	BFirst    bool    `json:"b_first"`
	A         pairRun `json:"a"`
	B         pairRun `json:"b"`
	RateRatio float64 `json:"rate_b_over_a"`
	CPURatio  float64 `json:"cpu_b_over_a"`
}

// PairsReport is --pairs' result; --json prints it.
type PairsReport struct {
	Header
	AgentA string       `json:"agent_exe_a"`
	AgentB string       `json:"agent_exe_b"`
	Pairs  []PairResult `json:"pairs"`
	// The medians of each build's runs, and of the pairs' ratios.
	MedianRateA     float64 `json:"median_rate_a"`
	MedianRateB     float64 `json:"median_rate_b"`
	MedianCPUA      float64 `json:"median_cpu_a"`
	MedianCPUB      float64 `json:"median_cpu_b"`
	MedianRateRatio float64 `json:"median_rate_ratio"`
	MedianCPURatio  float64 `json:"median_cpu_ratio"`
	// BFaster and BCheaper count the pairs in which B ran more tasks a
	// second, and spent less server CPU per task.
	BFaster  int `json:"b_faster"`
	BCheaper int `json:"b_cheaper"`
	// On a box where a pair's first run is faster (or slower) whichever
	// build it is, the pairs in which A ran first read B/A low and the
	// others high, and the median falls with whichever kind is the more.
	// The balanced ratios are the geometric mean of the two kinds'
	// geometric means, which cancels a constant edge; FirstRunEdge is that
	// edge, the first run's rate over the second's. All three are 0 unless
	// both kinds of pair ran.
	BalancedRateRatio float64 `json:"balanced_rate_ratio,omitempty"`
	BalancedCPURatio  float64 `json:"balanced_cpu_ratio,omitempty"`
	FirstRunEdge      float64 `json:"first_run_edge,omitempty"`
}

// runOneFunc runs the workload once with the nodes of exe.
type runOneFunc func(ctx context.Context, exe string) (pairRun, error)

// runPairs runs cfg.Pairs pairs: A first in odd pairs, B first in even ones.
func runPairs(ctx context.Context, cfg Config, a, b string, runOne runOneFunc, progress io.Writer) ([]PairResult, error) {
	var out []PairResult
	for i := 1; i <= cfg.Pairs; i++ {
		p := PairResult{Pair: i, BFirst: i%2 == 0}
		order := []string{"A", "B"}
		if p.BFirst {
			order = []string{"B", "A"}
		}
		for _, which := range order {
			exe, dst := a, &p.A
			if which == "B" {
				exe, dst = b, &p.B
			}
			r, err := runOne(ctx, exe)
			if err != nil {
				return out, fmt.Errorf("pair %d, build %s (%s): %w", i, which, exe, err)
			}
			*dst = r
			fmt.Fprintf(progress, "bench: pair %d/%d, %s: %.0f tasks/s, %.4f server CPU s per 1,000\n", i, cfg.Pairs, which, r.Rate, r.CPUPer1k)
		}
		p.RateRatio, p.CPURatio = ratio(p.B.Rate, p.A.Rate), ratio(p.B.CPUPer1k, p.A.CPUPer1k)
		out = append(out, p)
	}
	return out, nil
}

func ratio(b, a float64) float64 {
	if a == 0 {
		return 0
	}
	return b / a
}

// summarize fills rep's medians and counts from its pairs.
func (rep *PairsReport) summarize() {
	col := func(f func(PairResult) float64) []float64 {
		v := make([]float64, 0, len(rep.Pairs))
		for _, p := range rep.Pairs {
			v = append(v, f(p))
		}
		return v
	}
	rep.MedianRateA = median(col(func(p PairResult) float64 { return p.A.Rate }))
	rep.MedianRateB = median(col(func(p PairResult) float64 { return p.B.Rate }))
	rep.MedianCPUA = median(col(func(p PairResult) float64 { return p.A.CPUPer1k }))
	rep.MedianCPUB = median(col(func(p PairResult) float64 { return p.B.CPUPer1k }))
	rep.MedianRateRatio = median(col(func(p PairResult) float64 { return p.RateRatio }))
	rep.MedianCPURatio = median(col(func(p PairResult) float64 { return p.CPURatio }))
	rep.balance()
	rep.BFaster, rep.BCheaper = 0, 0
	for _, p := range rep.Pairs {
		if p.B.Rate > p.A.Rate {
			rep.BFaster++
		}
		if p.B.CPUPer1k < p.A.CPUPer1k {
			rep.BCheaper++
		}
	}
}

// balance fills the balanced ratios and the first run's edge.
func (rep *PairsReport) balance() {
	rep.BalancedRateRatio, rep.BalancedCPURatio, rep.FirstRunEdge = 0, 0, 0
	var rateA, rateB, cpuA, cpuB []float64
	for _, p := range rep.Pairs {
		if p.RateRatio <= 0 || p.CPURatio <= 0 {
			return
		}
		if p.BFirst {
			rateB, cpuB = append(rateB, p.RateRatio), append(cpuB, p.CPURatio)
		} else {
			rateA, cpuA = append(rateA, p.RateRatio), append(cpuA, p.CPURatio)
		}
	}
	if len(rateA) == 0 || len(rateB) == 0 {
		return
	}
	ga, gb := geomean(rateA), geomean(rateB)
	rep.BalancedRateRatio = math.Sqrt(ga * gb)
	rep.BalancedCPURatio = math.Sqrt(geomean(cpuA) * geomean(cpuB))
	rep.FirstRunEdge = math.Sqrt(gb / ga)
}

// geomean of v, all positive.
func geomean(v []float64) float64 {
	sum := 0.0
	for _, x := range v {
		sum += math.Log(x)
	}
	return math.Exp(sum / float64(len(v)))
}

// median of v (the mean of the middle two for an even count); 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// pairs is `docket bench --pairs`: exe is this binary, build A's nodes
// unless --agent-exe names another.
func pairs(ctx context.Context, cfg Config, exe string, args []string, stdout, stderr io.Writer) error {
	a := cmp.Or(cfg.AgentExe, exe)
	rep := &PairsReport{Header: newHeader(cfg, args), AgentA: a, AgentB: cfg.AgentExeB}
	runOne := func(ctx context.Context, agent string) (pairRun, error) {
		one := cfg
		one.AgentExe, one.Ceiling = agent, false // the ceiling measures neither build
		r := &runner{cfg: one, stderr: stderr, rep: &Report{Header: Header{Workload: one.Workload, Config: one.describe()}, Extra: map[string]any{}}}
		load := loadavg()
		if err := r.run(ctx, exe); err != nil {
			return pairRun{}, err
		}
		if r.main == nil {
			return pairRun{}, fmt.Errorf("workload %s measured no tasks", one.Workload)
		}
		cpu, _ := r.rep.Extra["server_cpu_s_per_1000"].(float64)
		return pairRun{Rate: r.main.ItemRate, CPUPer1k: cpu, P50Ms: r.main.P50Ms, LoadStart: load}, nil
	}
	ps, err := runPairs(ctx, cfg, a, cfg.AgentExeB, runOne, stderr)
	rep.Pairs = ps
	rep.summarize()
	rep.Machine.LoadEnd = loadavg()
	if err != nil {
		return err
	}
	return emit(stdout, cfg.JSON, rep, func(w io.Writer) { printPairs(w, rep) })
}

func printPairs(w io.Writer, rep *PairsReport) {
	fmt.Fprintf(w, "docket bench: workload %s, %s by turns, %s, %d CPUs, load %s -> %s\n", rep.Workload, plural(len(rep.Pairs), "pair"),
		rep.Started.Format(time.RFC3339), rep.Machine.CPUs, rep.Machine.LoadStart, rep.Machine.LoadEnd)
	fmt.Fprintf(w, "A: %s\nB: %s\n", rep.AgentA, rep.AgentB)
	fmt.Fprintf(w, "%5s %6s %11s %11s %8s %11s %11s %8s\n", "pair", "first", "A tasks/s", "B tasks/s", "B/A", "A cpu/1000", "B cpu/1000", "B/A")
	for _, p := range rep.Pairs {
		first := "A"
		if p.BFirst {
			first = "B"
		}
		fmt.Fprintf(w, "%5d %6s %11.0f %11.0f %8.3f %11.4f %11.4f %8.3f\n", p.Pair, first, p.A.Rate, p.B.Rate, p.RateRatio, p.A.CPUPer1k, p.B.CPUPer1k, p.CPURatio)
	}
	fmt.Fprintf(w, "%5s %6s %11.0f %11.0f %8.3f %11.4f %11.4f %8.3f  (medians; ratios are the pairs')\n", "med", "", rep.MedianRateA, rep.MedianRateB,
		rep.MedianRateRatio, rep.MedianCPUA, rep.MedianCPUB, rep.MedianCPURatio)
	fmt.Fprintf(w, "B ran faster in %d of %s, and spent less server CPU per task in %d\n", rep.BFaster, plural(len(rep.Pairs), "pair"), rep.BCheaper)
	if rep.BalancedRateRatio > 0 {
		fmt.Fprintf(w, "balanced for order: B/A %.3f tasks/s, %.3f server CPU per task; a pair's first run ran %.3f× the rate of its second\n",
			rep.BalancedRateRatio, rep.BalancedCPURatio, rep.FirstRunEdge)
	}
}

// plural is "1 pair" or "n pairs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// pairWorkloads are the workloads with a main op whose rate --pairs compares.
var pairWorkloads = []string{"enqueue", "drain", "cycle", "heartbeat"}

// parsePairs checks --pairs and --agent-exe-b.
func (c Config) parsePairs() []error {
	var errs []error
	if c.Pairs < 0 || c.Pairs > 100 {
		errs = append(errs, fmt.Errorf("--pairs %d: want 0..100", c.Pairs))
	}
	if c.Pairs == 0 {
		if c.AgentExeB != "" {
			errs = append(errs, errors.New("--agent-exe-b is build B of --pairs: give --pairs N"))
		}
		return errs
	}
	if c.AgentExeB == "" {
		errs = append(errs, errors.New("--pairs compares two builds: give --agent-exe-b (and --agent-exe for A unless it is this binary)"))
	}
	if c.Addr != "" {
		errs = append(errs, errors.New("--pairs starts a local cluster of each build: not with --addr"))
	}
	if !slices.Contains(pairWorkloads, c.Workload) {
		errs = append(errs, fmt.Errorf("--pairs compares the rate of %s, not of --workload %s", strings.Join(pairWorkloads, ", "), c.Workload))
	}
	return errs
}
