package bench

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func Test_PercentileNearestRank(t *testing.T) {
	// 1..100 ms: the q-quantile by nearest rank is ceil(q*100) ms.
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	cases := []struct {
		q    float64
		want time.Duration
	}{
		{0.01, 1 * time.Millisecond},
		{0.5, 50 * time.Millisecond},
		{0.9, 90 * time.Millisecond},
		{0.99, 99 * time.Millisecond},
		{0.999, 100 * time.Millisecond},
		{1, 100 * time.Millisecond},
	}
	for _, c := range cases {
		if got := Percentile(s, c.q); got != c.want {
			t.Errorf("Percentile(1..100, %v) = %v, want %v", c.q, got, c.want)
		}
	}
}

func Test_PercentileSmallAndEmpty(t *testing.T) {
	if got := Percentile(nil, 0.5); got != 0 {
		t.Fatalf("empty: %v", got)
	}
	one := []time.Duration{7}
	for _, q := range []float64{0.001, 0.5, 0.999, 1} {
		if got := Percentile(one, q); got != 7 {
			t.Fatalf("one sample q=%v: %v", q, got)
		}
	}
	// Four samples: p50 is the 2nd, p90 and p99.9 the 4th.
	four := []time.Duration{10, 20, 30, 40}
	if Percentile(four, 0.5) != 20 || Percentile(four, 0.9) != 40 || Percentile(four, 0.999) != 40 || Percentile(four, 0.25) != 10 {
		t.Fatalf("four samples: %v %v %v", Percentile(four, 0.5), Percentile(four, 0.9), Percentile(four, 0.999))
	}
}

func Test_PercentileThousand(t *testing.T) {
	// 1000 samples 1..1000 µs, shuffled, then sorted as Summarize does.
	s := make([]time.Duration, 1000)
	for i := range s {
		s[i] = time.Duration(i+1) * time.Microsecond
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	slices.Sort(s)
	if got := Percentile(s, 0.999); got != 999*time.Microsecond {
		t.Fatalf("p99.9 = %v", got)
	}
	if got := Percentile(s, 0.99); got != 990*time.Microsecond {
		t.Fatalf("p99 = %v", got)
	}
}

func Test_Rate(t *testing.T) {
	if got := Rate(1000, 2*time.Second); got != 500 {
		t.Fatalf("Rate(1000, 2s) = %v", got)
	}
	if got := Rate(3, 1500*time.Millisecond); got != 2 {
		t.Fatalf("Rate(3, 1.5s) = %v", got)
	}
	if got := Rate(5, 0); got != 0 {
		t.Fatalf("Rate(5, 0) = %v", got)
	}
}

func Test_RecorderSummarize(t *testing.T) {
	r := NewRecorder("enqueue")
	for i := 1; i <= 100; i++ {
		r.Observe(time.Duration(i)*time.Millisecond, 10)
	}
	r.Fail(errors.New("boom"))
	s := r.Summarize(4 * time.Second)
	if s.Count != 100 || s.Errors != 1 || s.Items != 1000 {
		t.Fatalf("counts: %+v", s)
	}
	if s.OpsRate != 25 || s.ItemRate != 250 {
		t.Fatalf("rates: %v ops/s %v items/s", s.OpsRate, s.ItemRate)
	}
	if s.P50Ms != 50 || s.P90Ms != 90 || s.P99Ms != 99 || s.P999Ms != 100 || s.MaxMs != 100 || s.MeanMs != 50.5 {
		t.Fatalf("latencies: %+v", s)
	}
}

func Test_RecorderBoundedSamples(t *testing.T) {
	if testing.Short() {
		t.Skip("fills two million samples")
	}
	r := NewRecorder("x")
	for i := 0; i < maxSamples+1000; i++ {
		r.Observe(time.Millisecond, 1)
	}
	if len(r.samples) != maxSamples {
		t.Fatalf("kept %d samples, want %d", len(r.samples), maxSamples)
	}
	if ok, _, _ := r.Counts(); ok != maxSamples+1000 {
		t.Fatalf("count %d", ok)
	}
}

func Test_RecorderEmpty(t *testing.T) {
	s := NewRecorder("idle").Summarize(time.Second)
	if s.Count != 0 || s.P99Ms != 0 || s.OpsRate != 0 {
		t.Fatalf("%+v", s)
	}
}
