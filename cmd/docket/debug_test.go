package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Test_DebugServerServesMetrics: --debug-addr serves the registry on
// /metrics and the profiles on /debug/pprof/.
func Test_DebugServerServesMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "docket_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	addr, stop, err := serveDebug("127.0.0.1:0", reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for path, want := range map[string]string{"/metrics": "docket_test_total 3", "/debug/pprof/": "goroutine"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("GET %s: %d, %v; body lacks %q", path, resp.StatusCode, err, want)
		}
	}
}
