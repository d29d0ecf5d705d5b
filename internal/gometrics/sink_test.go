package gometrics

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	metrics "github.com/armon/go-metrics"
	prommetrics "github.com/armon/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// feed makes the calls hashicorp/raft, raft-boltdb and memberlist make:
// samples, counters and gauges, with and without labels, keys with dots
// and dashes and slashes.
func feed(m *metrics.Metrics) {
	peer := func(id string) []metrics.Label { return []metrics.Label{{Name: "peer_id", Value: id}} }
	for i := range 40 {
		v := float32(i%7) + 0.25
		m.AddSample([]string{"raft", "commitTime"}, v)
		m.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, v*2, peer("n2"))
		m.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, v*3, peer("n3"))
		m.IncrCounterWithLabels([]string{"raft", "replication", "appendEntries", "logs"}, float32(i%3), peer("n2"))
		m.AddSample([]string{"raft", "boltdb", "getLog"}, v)
		m.AddSample([]string{"memberlist", "udp-sent.bytes"}, v)
	}
	m.IncrCounter([]string{"raft", "state", "leader"}, 1)
	m.IncrCounter([]string{"raft", "state", "leader"}, 2)
	m.SetGauge([]string{"raft", "peers"}, 3)
	m.SetGauge([]string{"raft", "peers"}, 5)
	m.SetGaugeWithLabels([]string{"raft", "leader", "oldestLogAge"}, 12, []metrics.Label{{Name: "rpc-type", Value: "x/y"}})
	m.EmitKey([]string{"raft", "ignored"}, 1)
}

func exposition(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func newMetrics(t *testing.T, service string, sink metrics.MetricSink) *metrics.Metrics {
	t.Helper()
	cfg := metrics.DefaultConfig(service)
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false
	cfg.EnableServiceLabel = false
	m, err := metrics.New(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Test_SameSeriesAsArmonSink: the same calls export, byte for byte in
// Prometheus' text format, what go-metrics' own Prometheus sink exports
// (names, types, help, labels, values and quantiles), so a dashboard or an
// alert written against that sink reads this one unchanged.
func Test_SameSeriesAsArmonSink(t *testing.T) {
	theirs := prometheus.NewRegistry()
	armon, err := prommetrics.NewPrometheusSinkFrom(prommetrics.PrometheusOpts{Registerer: theirs, Expiration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	feed(newMetrics(t, "docket", armon))

	ours := prometheus.NewRegistry()
	sink := NewSink("docket", time.Minute)
	ours.MustRegister(sink)
	feed(newMetrics(t, "", sink))

	want, got := exposition(t, theirs), exposition(t, ours)
	if got != want {
		t.Fatalf("exported series differ\n--- go-metrics' sink:\n%s\n--- this sink:\n%s", want, got)
	}
	for _, name := range []string{"docket_raft_commitTime", `peer_id="n3"`, "docket_memberlist_udp_sent_bytes", "docket_raft_state_leader 3"} {
		if !strings.Contains(got, name) {
			t.Errorf("the exposition lacks %q:\n%s", name, got)
		}
	}
}

// Test_SeriesExpire: a scrape drops a series not written for the
// expiration (judged by the scrapes between, so late by up to one scrape
// interval, never early), and a later write brings it back.
func Test_SeriesExpire(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	sink := NewSink("docket", time.Minute)
	sink.now = func() time.Time { return now }
	reg := prometheus.NewRegistry()
	reg.MustRegister(sink)
	gone := func() { // a peer that leaves
		sink.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 1, []metrics.Label{{Name: "peer_id", Value: "gone"}})
	}
	scrape := func(after time.Duration) string {
		now = now.Add(after)
		return exposition(t, reg)
	}
	gone()
	sink.IncrCounter([]string{"raft", "apply"}, 1)
	scrape(10 * time.Second)
	now = now.Add(30 * time.Second)
	sink.IncrCounter([]string{"raft", "apply"}, 1)
	if got := scrape(0); !strings.Contains(got, `peer_id="gone"`) {
		t.Fatalf("a series written 40 s ago is gone:\n%s", got)
	}
	if got := scrape(15 * time.Second); !strings.Contains(got, `peer_id="gone"`) {
		t.Fatalf("a series written 55 s ago is gone:\n%s", got)
	}
	got := scrape(20 * time.Second)
	if strings.Contains(got, `peer_id="gone"`) {
		t.Fatalf("a series last written 75 s ago, before a scrape 65 s ago, is still exported:\n%s", got)
	}
	if !strings.Contains(got, "docket_raft_apply 2") {
		t.Fatalf("a series written 35 s ago is gone:\n%s", got)
	}
	gone()
	if got := scrape(0); !strings.Contains(got, `peer_id="gone"`) {
		t.Fatalf("a series written again is not exported:\n%s", got)
	}
	now = now.Add(10 * time.Minute) // no scrape for 10 minutes
	sink.IncrCounter([]string{"raft", "fresh"}, 1)
	got = scrape(0)
	if strings.Contains(got, "docket_raft_apply") || strings.Contains(got, `peer_id="gone"`) || !strings.Contains(got, "docket_raft_fresh 1") {
		t.Fatalf("10 minutes after the last scrape, what was written before it must go and what was written since stay:\n%s", got)
	}
}

// Test_ConcurrentWritesAndScrapes: writers and scrapes at once (run with
// -race) lose no count.
func Test_ConcurrentWritesAndScrapes(t *testing.T) {
	sink := NewSink("docket", time.Minute)
	reg := prometheus.NewRegistry()
	reg.MustRegister(sink)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				sink.IncrCounter([]string{"raft", "writes"}, 1)
				sink.AddSampleWithLabels([]string{"raft", "rpc"}, float32(i), []metrics.Label{{Name: "w", Value: string(rune('a' + w))}})
			}
		}()
	}
	for range 20 {
		exposition(t, reg)
	}
	wg.Wait()
	got := exposition(t, reg)
	if !strings.Contains(got, "docket_raft_writes 2000") {
		t.Fatalf("lost counts:\n%s", got)
	}
	if n := strings.Count(got, "docket_raft_rpc_count{"); n != 4 {
		t.Fatalf("%d summaries for 4 label values:\n%s", n, got)
	}
}

func Test_NegativeCountIsNotAdded(t *testing.T) {
	sink := NewSink("", 0)
	reg := prometheus.NewRegistry()
	reg.MustRegister(sink)
	sink.IncrCounter([]string{"c"}, 2)
	sink.IncrCounter([]string{"c"}, -1)
	if got := exposition(t, reg); !strings.Contains(got, "\nc 2\n") {
		t.Fatalf("want c 2:\n%s", got)
	}
}

// BenchmarkSink is the write raft makes on every AppendEntries, through
// go-metrics, into each sink.
func BenchmarkSink(b *testing.B) {
	labels := []metrics.Label{{Name: "peer_id", Value: "127.0.0.1:7742"}}
	key := []string{"raft", "replication", "appendEntries", "rpc"}
	run := func(b *testing.B, service string, sink metrics.MetricSink) {
		cfg := metrics.DefaultConfig(service)
		cfg.EnableHostname, cfg.EnableRuntimeMetrics = false, false
		m, err := metrics.New(cfg, sink)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			m.MeasureSinceWithLabels(key, start, labels)
		}
	}
	b.Run("sink=armon", func(b *testing.B) {
		s, err := prommetrics.NewPrometheusSinkFrom(prommetrics.PrometheusOpts{Registerer: prometheus.NewRegistry(), Expiration: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		run(b, "docket", s)
	})
	b.Run("sink=gometrics", func(b *testing.B) {
		run(b, "", NewSink("docket", time.Minute))
	})
}

// Test_DroppedPrefixes: a key under a dropped prefix is never exported,
// and its neighbours are.
func Test_DroppedPrefixes(t *testing.T) {
	sink := NewSink("docket", time.Minute, []string{"raft", "net"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(sink)
	labels := []metrics.Label{{Name: "rpcType", Value: "AppendEntries"}}
	for range 3 {
		sink.AddSampleWithLabels([]string{"raft", "net", "rpcDecode"}, 1, labels)
		sink.IncrCounter([]string{"raft", "net"}, 1)
		sink.SetGauge([]string{"raft", "net", "x"}, 1)
		sink.AddSample([]string{"raft", "network"}, 1)
		sink.AddSample([]string{"raft"}, 1)
	}
	got := exposition(t, reg)
	if strings.Contains(got, "docket_raft_net_") || strings.Contains(got, "docket_raft_net ") {
		t.Fatalf("a dropped series is exported:\n%s", got)
	}
	if !strings.Contains(got, "docket_raft_network_count 3") || !strings.Contains(got, "docket_raft_count 3") {
		t.Fatalf("a series beside the dropped prefix is missing:\n%s", got)
	}
}
