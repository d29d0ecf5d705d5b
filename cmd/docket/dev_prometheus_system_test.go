//go:build system

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Test_DevSystemPrometheusScrapes: a real Prometheus (Debian's package),
// run with the prometheus.yml `docket dev` writes (the README's scrape
// config: https, the CA file, the admin token's file, job docket), sees
// every node of a secure dev cluster up.
func Test_DevSystemPrometheusScrapes(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("no prometheus on PATH (apt-get install prometheus)")
	}
	dir := t.TempDir()
	base := freeBase(t, 3)
	startDev(t, "--data-dir", dir, "--base-port", fmt.Sprint(base))
	if out, err := exec.Command("promtool", "check", "config", filepath.Join(dir, DevPrometheusFile)).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--config.file", filepath.Join(dir, DevPrometheusFile),
		"--storage.tsdb.path", filepath.Join(t.TempDir(), "tsdb"), "--web.listen-address", web)
	logs := &logBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()

	type target struct {
		Labels    map[string]string `json:"labels"`
		ScrapeURL string            `json:"scrapeUrl"`
		Health    string            `json:"health"`
		LastError string            `json:"lastError"`
	}
	var last []target
	upCount := func() int {
		resp, err := http.Get("http://" + web + "/api/v1/targets?state=active")
		if err != nil {
			return 0 // not listening yet
		}
		defer resp.Body.Close()
		var body struct {
			Data struct {
				ActiveTargets []target `json:"activeTargets"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return 0
		}
		last = body.Data.ActiveTargets
		up := 0
		for _, tg := range last {
			if tg.Health == "up" && tg.Labels["job"] == "docket" {
				up++
			}
		}
		return up
	}
	// The first scrape comes within the 15 s interval.
	deadline := time.Now().Add(90 * time.Second)
	for upCount() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus does not see 3 docket targets up: %+v\n%s", last, logs.String())
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}
