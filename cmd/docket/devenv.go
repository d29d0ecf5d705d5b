package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dockethq/docket/cmd/docket/localcluster"
)

// DevEnvFile is the file in `docket dev`'s data dir that a shell sources
// to reach the cluster: its addresses, CA and admin token.
const DevEnvFile = "env"

// devEnv is the environment the verbs need to reach c, in the order it is
// printed.
func devEnv(c *localcluster.Cluster) [][2]string {
	env := [][2]string{{"DOCKET_ADDR", strings.Join(c.Addrs(), ",")}}
	if c.TLS != nil {
		// The nodes verify a client certificate only if one is given
		// (--tls-client-auth verify-if-given): the CA is all a shell needs.
		env = append(env, [2]string{"DOCKET_TLS_CA", c.TLS.CA})
	}
	if c.Token != "" {
		env = append(env, [2]string{envToken, c.Token})
	}
	// Not read by the verbs: for a user's scripts and scrape configs.
	var metrics, dashboards []string
	for _, n := range c.Nodes {
		if n.Metrics != "" {
			metrics = append(metrics, n.Metrics)
		}
		if n.HTTP != "" {
			dashboards = append(dashboards, n.HTTP)
		}
	}
	if len(metrics) > 0 {
		env = append(env, [2]string{"DOCKET_METRICS", strings.Join(metrics, ",")})
	}
	if len(dashboards) > 0 {
		env = append(env, [2]string{"DOCKET_DASHBOARD", strings.Join(dashboards, ",")})
	}
	return env
}

// DevPrometheusFile is the Prometheus configuration `docket dev` writes
// into its data dir: a scrape job for every node's /metrics.
const DevPrometheusFile = "prometheus.yml"

// prometheusConfig is a Prometheus configuration that scrapes every node
// of c as job "docket", the name cmd/docket/monitoring/alerts.yml selects.
// A secure cluster is scraped over HTTPS with its CA and the admin token's
// file (any token with reader or admin over every tenant works).
func prometheusConfig(c *localcluster.Cluster) string {
	var targets []string
	for _, n := range c.Nodes {
		if n.Metrics != "" {
			u := strings.TrimPrefix(strings.TrimPrefix(n.Metrics, "https://"), "http://")
			targets = append(targets, "'"+strings.TrimSuffix(u, "/metrics")+"'")
		}
	}
	var b strings.Builder
	b.WriteString("# Written by docket dev: prometheus --config.file THIS-FILE\n")
	b.WriteString("global:\n  scrape_interval: 15s\n")
	b.WriteString("scrape_configs:\n  - job_name: docket  # cmd/docket/monitoring/alerts.yml selects job=\"docket\"\n")
	if c.TLS != nil && c.Token != "" {
		fmt.Fprintf(&b, "    scheme: https\n    authorization:\n      credentials_file: %s\n    tls_config:\n      ca_file: %s\n", c.TokenFile, c.TLS.CA)
	}
	fmt.Fprintf(&b, "    static_configs:\n      - targets: [%s]\n", strings.Join(targets, ", "))
	return b.String()
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// printDevAccess writes the env file (0600: it holds the admin secret)
// and tells the user how to reach the cluster from another shell.
func printDevAccess(w io.Writer, c *localcluster.Cluster) error {
	var parts, set []string
	for _, kv := range devEnv(c) {
		parts = append(parts, kv[0]+"="+shellQuote(kv[1]))
		set = append(set, kv[0])
	}
	line := "export " + strings.Join(parts, " ")
	// A shell that reached another cluster before keeps none of its
	// material: a stale CA, certificate or token would fail every call.
	var unset []string
	for _, k := range []string{"DOCKET_TLS_CA", "DOCKET_TLS_CERT", "DOCKET_TLS_KEY", envToken} {
		if !slices.Contains(set, k) {
			unset = append(unset, k)
		}
	}
	line = "unset " + strings.Join(unset, " ") + "; " + line
	path := filepath.Join(c.Dir, DevEnvFile)
	// Written fresh each start: the addresses may differ (--base-port).
	if err := os.WriteFile(path+".tmp", []byte(line+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	prom := filepath.Join(c.Dir, DevPrometheusFile)
	if err := os.WriteFile(prom, []byte(prometheusConfig(c)), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", prom, err)
	}
	fmt.Fprintf(w, "Prometheus: prometheus --config.file %s\n", prom)
	if c.TLS == nil {
		fmt.Fprintf(w, "INSECURE: no TLS, no tokens; anyone who reaches these ports may do anything\n")
	} else {
		fmt.Fprintf(w, "TLS CA:      %s\n", c.TLS.CA)
		fmt.Fprintf(w, "admin token: %s   (every role, every tenant; also in %s)\n", c.Token, c.TokenFile)
	}
	fmt.Fprintf(w, "in another shell:\n  source %s\nor\n  %s\n", path, line)
	fmt.Fprintf(w, "then try:  docket enqueue jobs 'hello'; docket stats\n")
	return nil
}
