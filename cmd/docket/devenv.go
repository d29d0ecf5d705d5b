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
