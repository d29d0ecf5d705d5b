package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/dockethq/docket/cmd/docket/localcluster"
)

// Test_READMEScrapeConfigIsDevs: the scrape config README shows is the
// one `docket dev` writes for `make run` (prometheus.yml, which
// Test_DevSystemPrometheusScrapes runs Prometheus with), line for line but
// for comments and the checkout's path.
func Test_READMEScrapeConfigIsDevs(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(scrape_configs:\n.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README has no yaml block with scrape_configs")
	}
	const root = "/path/to/docket/data/dev"
	c := &localcluster.Cluster{Dir: root, TLS: &localcluster.TLSFiles{CA: root + "/tls/docket-ca.pem"},
		Token: "secret", TokenFile: root + "/admin.token"}
	for i := 1; i <= 3; i++ {
		c.Nodes = append(c.Nodes, &localcluster.Node{Metrics: "https://127.0.0.1:760" + string(rune('0'+i)) + "/metrics"})
	}
	uncomment := func(s string) []string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if i := strings.Index(l, "#"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimRight(l, " "); strings.TrimSpace(l) != "" {
				out = append(out, l)
			}
		}
		return out
	}
	dev := uncomment(prometheusConfig(c))
	start := -1
	for i, l := range dev {
		if l == "scrape_configs:" {
			start = i
		}
	}
	want, got := strings.Join(dev[start:], "\n"), strings.Join(uncomment(string(m[1])), "\n")
	if start < 0 || got != want {
		t.Fatalf("README's scrape config:\n%s\ndocket dev writes:\n%s", got, want)
	}
}
