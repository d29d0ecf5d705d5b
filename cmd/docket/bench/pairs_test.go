package bench

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
)

// Test_PairsTakeTurns: build A runs first in odd pairs and B in even ones,
// each pair is read as B ÷ A, and the summary is of the pairs.
func Test_PairsTakeTurns(t *testing.T) {
	rates := map[string][]float64{"a": {100, 200, 100}, "b": {110, 150, 130}}
	cpus := map[string][]float64{"a": {0.2, 0.2, 0.1}, "b": {0.1, 0.3, 0.1}}
	var order []string
	seen := map[string]int{}
	runOne := func(_ context.Context, exe string) (pairRun, error) {
		order = append(order, exe)
		i := seen[exe]
		seen[exe]++
		return pairRun{Rate: rates[exe][i], CPUPer1k: cpus[exe][i]}, nil
	}
	ps, err := runPairs(context.Background(), Config{Pairs: 3}, "a", "b", runOne, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "b", "a", "a", "b"}; !slices.Equal(order, want) {
		t.Fatalf("runs in order %v, want %v", order, want)
	}
	rep := &PairsReport{Pairs: ps}
	rep.summarize()
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	for i, want := range []float64{1.1, 0.75, 1.3} {
		if p := ps[i]; !near(p.RateRatio, want) || p.BFirst != (i == 1) {
			t.Errorf("pair %d: ratio %v, B first %v; want %v, %v", i+1, p.RateRatio, p.BFirst, want, i == 1)
		}
	}
	if !near(rep.MedianRateA, 100) || !near(rep.MedianRateB, 130) || !near(rep.MedianRateRatio, 1.1) ||
		!near(rep.MedianCPURatio, 1) || rep.BFaster != 2 || rep.BCheaper != 1 {
		t.Fatalf("summary %+v", rep)
	}
}

// Test_PairsStopAtAFailedRun: a run that fails ends the pairs, naming the
// pair and the build, and keeps the pairs completed before it.
func Test_PairsStopAtAFailedRun(t *testing.T) {
	boom := errors.New("boom")
	n := 0
	runOne := func(_ context.Context, exe string) (pairRun, error) {
		n++
		if n == 3 { // pair 2's first run, B's
			return pairRun{}, boom
		}
		return pairRun{Rate: 1, CPUPer1k: 1}, nil
	}
	ps, err := runPairs(context.Background(), Config{Pairs: 3}, "a", "b", runOne, io.Discard)
	if !errors.Is(err, boom) || len(ps) != 1 || err.Error() != "pair 2, build B (b): boom" {
		t.Fatalf("pairs %v, err %v", ps, err)
	}
}

func Test_Median(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// Test_PairsTableCountsInWords: the table names one pair in the singular.
func Test_PairsTableCountsInWords(t *testing.T) {
	for n, want := range map[int][]string{1: {"1 pair by turns", "of 1 pair,"}, 2: {"2 pairs by turns", "of 2 pairs,"}} {
		rep := &PairsReport{Header: Header{Workload: "cycle"}, Pairs: make([]PairResult, n)}
		rep.summarize()
		var b strings.Builder
		printPairs(&b, rep)
		for _, w := range want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%d pairs: table lacks %q:\n%s", n, w, b.String())
			}
		}
	}
}

// Test_PairsBalanceTheFirstRunsEdge: when whichever build runs first in a
// pair runs 10 % faster, the pairs' median says B is slower or faster by
// the parity of the count, but the balanced ratio sees equal builds and
// names the edge.
func Test_PairsBalanceTheFirstRunsEdge(t *testing.T) {
	var ps []PairResult
	for i := 1; i <= 5; i++ {
		p := PairResult{Pair: i, BFirst: i%2 == 0}
		first, second := pairRun{Rate: 110, CPUPer1k: 0.9}, pairRun{Rate: 100, CPUPer1k: 1}
		if p.BFirst {
			p.B, p.A = first, second
		} else {
			p.A, p.B = first, second
		}
		p.RateRatio, p.CPURatio = ratio(p.B.Rate, p.A.Rate), ratio(p.B.CPUPer1k, p.A.CPUPer1k)
		ps = append(ps, p)
	}
	rep := &PairsReport{Pairs: ps}
	rep.summarize()
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if near(rep.MedianRateRatio, 1) {
		t.Fatalf("the median ratio %v already cancels the edge; the test proves nothing", rep.MedianRateRatio)
	}
	if !near(rep.BalancedRateRatio, 1) || !near(rep.BalancedCPURatio, 1) || !near(rep.FirstRunEdge, 1.1) {
		t.Fatalf("balanced rate %v, CPU %v, first run's edge %v; want 1, 1, 1.1", rep.BalancedRateRatio, rep.BalancedCPURatio, rep.FirstRunEdge)
	}
	var b strings.Builder
	printPairs(&b, rep)
	if !strings.Contains(b.String(), "balanced for order: B/A 1.000 tasks/s, 1.000 server CPU per task; a pair's first run ran 1.100× the rate of its second") {
		t.Fatalf("table lacks the balanced line:\n%s", b.String())
	}

	one := &PairsReport{Pairs: ps[:1]}
	one.summarize()
	if one.BalancedRateRatio != 0 || strings.Contains(func() string { var b strings.Builder; printPairs(&b, one); return b.String() }(), "balanced") {
		t.Fatal("one pair has no order to balance, but the report balanced it")
	}
}
