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
