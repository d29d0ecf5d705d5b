package bench

import (
	"math"
	"slices"
	"sync"
	"time"
)

// maxSamples bounds the latencies one Recorder keeps per operation. Past it,
// samples are kept by reservoir sampling (deterministic stride), so memory
// stays bounded on long runs while counts and rates stay exact.
const maxSamples = 2_000_000

// Recorder collects the latencies of one operation from many goroutines.
type Recorder struct {
	name string

	mu      sync.Mutex
	samples []time.Duration
	seen    uint64 // successful ops, including those not kept as samples
	errs    uint64
	items   uint64 // tasks moved (an op may carry a batch)
	rng     uint64 // xorshift state for reservoir sampling
	causes  []string
}

// NewRecorder returns an empty Recorder for the named operation.
func NewRecorder(name string) *Recorder { return &Recorder{name: name, rng: 0x9E3779B97F4A7C15} }

// Observe records one successful operation that took d and moved items
// tasks.
func (r *Recorder) Observe(d time.Duration, items int) {
	r.mu.Lock()
	r.seen++
	r.items += uint64(items)
	if len(r.samples) < maxSamples {
		r.samples = append(r.samples, d)
	} else {
		// Algorithm R: keep the new sample with probability
		// maxSamples/seen, in a uniformly chosen slot (xorshift draw).
		r.rng ^= r.rng << 13
		r.rng ^= r.rng >> 7
		r.rng ^= r.rng << 17
		if j := r.rng % r.seen; j < maxSamples {
			r.samples[j] = d
		}
	}
	r.mu.Unlock()
}

// Fail records one failed operation and keeps a few distinct causes.
func (r *Recorder) Fail(err error) {
	r.mu.Lock()
	r.errs++
	if err != nil && len(r.causes) < 5 && !slices.Contains(r.causes, err.Error()) {
		r.causes = append(r.causes, err.Error())
	}
	r.mu.Unlock()
}

// merge adds what a ceiling node measured: its exact counts and its
// (possibly thinned) samples.
func (r *Recorder) merge(n *nodeResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen += n.OK
	r.errs += n.Failed
	r.items += n.Items
	r.samples = append(r.samples, n.Samples...)
	for _, c := range n.Causes {
		if len(r.causes) < 5 && !slices.Contains(r.causes, c) {
			r.causes = append(r.causes, c)
		}
	}
}

// Causes returns up to five distinct error messages seen.
func (r *Recorder) Causes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.causes)
}

// Counts returns the successful ops, failed ops and items so far.
func (r *Recorder) Counts() (ok, failed, items uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen, r.errs, r.items
}

// Summary is one operation's line of the final table.
type Summary struct {
	Op       string  `json:"op"`
	Count    uint64  `json:"count"`
	Errors   uint64  `json:"errors"`
	Items    uint64  `json:"items"`
	Seconds  float64 `json:"seconds"`
	OpsRate  float64 `json:"ops_per_sec"`
	ItemRate float64 `json:"items_per_sec"`
	MeanMs   float64 `json:"mean_ms"`
	P50Ms    float64 `json:"p50_ms"`
	P90Ms    float64 `json:"p90_ms"`
	P99Ms    float64 `json:"p99_ms"`
	P999Ms   float64 `json:"p999_ms"`
	MaxMs    float64 `json:"max_ms"`
	// ErrorCauses are up to five distinct error messages.
	ErrorCauses []string `json:"error_causes,omitempty"`
}

// Summarize computes rates over elapsed and the latency percentiles.
func (r *Recorder) Summarize(elapsed time.Duration) Summary {
	r.mu.Lock()
	s := slices.Clone(r.samples)
	ok, failed, items := r.seen, r.errs, r.items
	causes := slices.Clone(r.causes)
	r.mu.Unlock()
	slices.Sort(s)
	out := Summary{Op: r.name, Count: ok, Errors: failed, Items: items, Seconds: elapsed.Seconds(),
		OpsRate: Rate(ok, elapsed), ItemRate: Rate(items, elapsed), ErrorCauses: causes}
	if len(s) == 0 {
		return out
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	out.MeanMs = ms(sum / time.Duration(len(s)))
	out.P50Ms = ms(Percentile(s, 0.50))
	out.P90Ms = ms(Percentile(s, 0.90))
	out.P99Ms = ms(Percentile(s, 0.99))
	out.P999Ms = ms(Percentile(s, 0.999))
	out.MaxMs = ms(s[len(s)-1])
	return out
}

// Percentile returns the nearest-rank q-quantile (0 < q <= 1) of sorted:
// the smallest sample such that at least q of all samples are at or below
// it. It returns 0 for no samples.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)) - 1e-9))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

// Rate is n per second over elapsed, 0 for no time.
func Rate(n uint64, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(n) / elapsed.Seconds()
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
