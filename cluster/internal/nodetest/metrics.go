package nodetest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Series finds name{labels} in reg; labels are "k=v" pairs.
func Series(t testing.TB, reg *prometheus.Registry, name string, labels ...string) (*dto.MetricFamily, *dto.Metric) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for _, kv := range labels {
				k, v, _ := strings.Cut(kv, "=")
				if have[k] != v {
					continue next
				}
			}
			return f, m
		}
	}
	return nil, nil
}

// MetricValue is the value of a counter or gauge series, and whether it
// exists.
func MetricValue(t testing.TB, reg *prometheus.Registry, name string, labels ...string) (float64, bool) {
	t.Helper()
	f, m := Series(t, reg, name, labels...)
	if m == nil {
		return 0, false
	}
	if f.GetType() == dto.MetricType_COUNTER {
		return m.GetCounter().GetValue(), true
	}
	return m.GetGauge().GetValue(), true
}
