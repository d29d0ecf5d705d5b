// Package gometrics exports what libraries measure through go-metrics
// (hashicorp/raft, raft-boltdb, memberlist) to a Prometheus registry. It
// owns one thing: a go-metrics sink that is also a Prometheus collector.
//
// # Decisions and trade-offs
//
//   - The series are the ones go-metrics' own Prometheus sink
//     (armon/go-metrics/prometheus) exports: the same names (the key's parts
//     joined by "_", prefixed), the same types (a sample is a summary with
//     the 0.5, 0.9 and 0.99 quantiles over 10 s, a counter a counter, a
//     gauge a gauge), the go-metrics labels as constant labels, and a series
//     not written for a while dropped. Dashboards and alerts written against
//     that sink read this one unchanged (Test_SameSeriesAsArmonSink).
//   - Cheap on the write path, because hashicorp/raft writes on its
//     hottest: about fifteen measurements per log entry on a leader and six
//     per AppendEntries on a follower. go-metrics' own sink joins the key
//     into new strings, allocates a copy of the series and stores it in a
//     sync.Map on every call: at 16 callers that was 8–13 % of a node's CPU
//     (BENCHMARKS.md). Here a write builds the series' identity in a buffer
//     on the stack, finds it under a read lock without allocating, and
//     stamps it with the scrape count (below) at most once per scrape.
//   - A caller may name key prefixes the sink drops (NewSink's drop): a
//     series of the kind is found as cheaply as any other and written to
//     nowhere. A summary costs its observation five quantile-stream inserts
//     (one per age bucket), the larger part of what a sample costs once the
//     lookup is cheap.
//   - Expiry is judged at collection, not at write. A write stamps its series
//     with the number of scrapes so far, not with the time: reading the clock
//     cost more than the rest of the write on the machines measured. A scrape
//     drops a series whose last write came before a scrape at least the
//     expiration ago, so a series is dropped late (by up to one scrape
//     interval), never early, and a peer that left stops being reported.
package gometrics

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metrics "github.com/armon/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// kind is what a series records; it is the first byte of a series' identity,
// so a counter and a sample of the same key are two series, as in
// go-metrics' own sink.
type kind byte

const (
	kindGauge kind = iota + 1
	kindCounter
	kindSummary
)

// Sink is a go-metrics MetricSink that registers as a Prometheus Collector.
// Its zero value is not usable; make one with NewSink.
type Sink struct {
	prefix     string
	expiration time.Duration
	drop       [][]string       // key prefixes written to nowhere
	now        func() time.Time // the clock scrapes read; tests move it

	// epoch counts the scrapes; a write stamps its series with it.
	epoch atomic.Int64

	mu     sync.RWMutex
	series map[string]*series // by identity (appendID)
	starts []epochStart       // when each epoch still needed began, oldest first
}

// epochStart is when a scrape began an epoch.
type epochStart struct {
	epoch int64
	at    time.Time
}

// series is one exported metric and when it was last written. A dropped
// series holds no metric.
type series struct {
	gauge   prometheus.Gauge
	counter prometheus.Counter
	summary prometheus.Summary
	touched atomic.Int64 // the sink's epoch at the last write
}

// collector is the one of the three metrics the series holds, or nil.
func (s *series) collector() prometheus.Collector {
	switch {
	case s.gauge != nil:
		return s.gauge
	case s.counter != nil:
		return s.counter
	case s.summary != nil:
		return s.summary
	}
	return nil
}

// NewSink makes a sink whose series are named prefix_<key parts>, that
// stops exporting a series not written for expiration (0: never), and
// that never exports a key that begins with one of drop's.
func NewSink(prefix string, expiration time.Duration, drop ...[]string) *Sink {
	s := &Sink{prefix: prefix, expiration: expiration, drop: drop, now: time.Now, series: make(map[string]*series)}
	// Epoch 0 began with the sink. When does not matter: no epoch comes
	// before it for its start to prove a series old.
	s.starts = []epochStart{{epoch: 0}}
	return s
}

// SetGauge sets the gauge named by key.
func (s *Sink) SetGauge(key []string, val float32) { s.SetGaugeWithLabels(key, val, nil) }

// SetGaugeWithLabels sets the gauge named by key and labels.
func (s *Sink) SetGaugeWithLabels(key []string, val float32, labels []metrics.Label) {
	if g := s.get(kindGauge, key, labels).gauge; g != nil {
		g.Set(float64(val))
	}
}

// EmitKey does nothing: a key/value event has no Prometheus type, and
// go-metrics' own sink drops it too.
func (s *Sink) EmitKey([]string, float32) {}

// IncrCounter adds val to the counter named by key.
func (s *Sink) IncrCounter(key []string, val float32) { s.IncrCounterWithLabels(key, val, nil) }

// IncrCounterWithLabels adds val to the counter named by key and labels. A
// negative val is not added: a Prometheus counter only grows (go-metrics'
// own sink panics on one).
func (s *Sink) IncrCounterWithLabels(key []string, val float32, labels []metrics.Label) {
	c := s.get(kindCounter, key, labels).counter
	if c != nil && val >= 0 {
		c.Add(float64(val))
	}
}

// AddSample records val in the summary named by key.
func (s *Sink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

// AddSampleWithLabels records val in the summary named by key and labels.
func (s *Sink) AddSampleWithLabels(key []string, val float32, labels []metrics.Label) {
	if sm := s.get(kindSummary, key, labels).summary; sm != nil {
		sm.Observe(float64(val))
	}
}

// get finds or makes the series of k, key and labels, and stamps it as
// written now. The lookup with a []byte converted in the index expression
// does not allocate.
func (s *Sink) get(k kind, key []string, labels []metrics.Label) *series {
	var buf [256]byte
	id := appendID(buf[:0], k, key, labels)
	s.mu.RLock()
	sr := s.series[string(id)]
	s.mu.RUnlock()
	if sr == nil {
		sr = s.add(string(id), k, key, labels)
	}
	if e := s.epoch.Load(); sr.touched.Load() != e {
		sr.touched.Store(e) // once an epoch: no shared cache line written per call
	}
	return sr
}

// add makes the series of id, or returns the one another writer made
// first.
func (s *Sink) add(id string, k kind, key []string, labels []metrics.Label) *series {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sr := s.series[id]; sr != nil {
		return sr
	}
	sr := &series{}
	sr.touched.Store(s.epoch.Load())
	s.series[id] = sr
	if s.dropped(key) {
		return sr
	}
	parts := key
	if s.prefix != "" {
		parts = append([]string{s.prefix}, key...)
	}
	name := string(appendName(nil, parts))
	var constLabels prometheus.Labels
	if len(labels) > 0 {
		constLabels = make(prometheus.Labels, len(labels))
		for _, l := range labels {
			constLabels[l.Name] = l.Value
		}
	}
	switch k {
	case kindGauge:
		sr.gauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: name, ConstLabels: constLabels})
	case kindCounter:
		sr.counter = prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: name, ConstLabels: constLabels})
	default:
		sr.summary = prometheus.NewSummary(prometheus.SummaryOpts{
			Name: name, Help: name, ConstLabels: constLabels,
			MaxAge:     10 * time.Second,
			Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
		})
	}
	return sr
}

// dropped tells whether key begins with a prefix the sink drops.
func (s *Sink) dropped(key []string) bool {
	for _, d := range s.drop {
		if len(key) >= len(d) && slices.Equal(key[:len(d)], d) {
			return true
		}
	}
	return false
}

// Describe sends nothing: the series come and go with what the libraries
// measure, so the sink is an unchecked collector.
func (s *Sink) Describe(chan<- *prometheus.Desc) {}

// Collect drops the series not written for the expiration, begins a new
// epoch and sends the rest. It collects outside the lock, so a slow scrape
// never holds up a write.
func (s *Sink) Collect(ch chan<- prometheus.Metric) {
	now := s.now()
	s.mu.Lock()
	// Every series last written in an epoch before the newest one that began
	// at or before now - expiration was last written before then.
	drop := int64(-1)
	if s.expiration > 0 {
		cutoff := now.Add(-s.expiration)
		keep := 0
		for i, st := range s.starts {
			if st.at.After(cutoff) {
				break
			}
			drop, keep = st.epoch, i
		}
		s.starts = s.starts[keep:] // the epochs before it decide nothing any more
	}
	live := make([]prometheus.Collector, 0, len(s.series))
	for id, sr := range s.series {
		if sr.touched.Load() < drop {
			delete(s.series, id)
			continue
		}
		if c := sr.collector(); c != nil {
			live = append(live, c)
		}
	}
	s.starts = append(s.starts, epochStart{epoch: s.epoch.Add(1), at: now})
	s.mu.Unlock()
	for _, c := range live {
		c.Collect(ch)
	}
}

// appendID appends the identity of a series: its kind, its name's parts
// and its labels, each ended by a byte no name or label holds.
func appendID(b []byte, k kind, key []string, labels []metrics.Label) []byte {
	b = append(b, byte(k))
	for _, p := range key {
		b = append(append(b, p...), 0)
	}
	for _, l := range labels {
		b = append(append(append(append(b, 1), l.Name...), 0), l.Value...)
	}
	return b
}

// appendName appends key's parts joined by "_", with " ", ".", "=", "-"
// and "/" made "_", as go-metrics' own sink names its series. Prometheus
// takes any other UTF-8 in a name, quoted.
func appendName(b []byte, key []string) []byte {
	for i, p := range key {
		if i > 0 {
			b = append(b, '_')
		}
		for j := 0; j < len(p); j++ {
			c := p[j]
			switch c {
			case ' ', '.', '=', '-', '/':
				c = '_'
			}
			b = append(b, c)
		}
	}
	return b
}
