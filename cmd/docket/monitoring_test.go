package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/internal/testaddr"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// served scrapes url and returns the metric family names in it.
func served(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			names[f[2]] = true
		}
	}
	return names
}

var metricName = regexp.MustCompile(`\b(docket_[A-Za-z0-9_]+)`)

// usedNames lists the docket_* metric names in exprs, with a histogram's
// or summary's _sum, _count and _bucket series named by their family.
func usedNames(exprs []string) []string {
	set := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metricName.FindAllString(e, -1) {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				m = strings.TrimSuffix(m, suf)
			}
			set[m] = true
		}
	}
	var out []string
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Test_DashboardAndAlertsUseServedMetrics is the check that every
// metric name the Grafana dashboard and the alert rules use is one a real
// agent serves on /metrics, once it has done the work that makes each
// series appear.
func Test_DashboardAndAlertsUseServedMetrics(t *testing.T) {
	grpcAddr, debug := testaddr.Free(t), testaddr.Free(t)
	// The data dir's removal is a cleanup too: made here, it runs after
	// the agent's stop below (cleanups run last first), not under it.
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"agent", "--id", "m1", "--data-dir", dir, "--grpc-addr", grpcAddr,
			"--raft-addr", testaddr.Free(t), "--gossip-addr", testaddr.Free(t), "--bootstrap-expect", "1", "--debug-addr", debug}, &bytes.Buffer{}, &bytes.Buffer{})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	c := mustClientWith(t, []string{grpcAddr}, client.WithAttemptTimeout(5*time.Second))
	ictx, icancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer icancel()
	// The work that makes every series appear: a queue with totals, a
	// pending task, a claim, a heartbeat and a stale fence.
	var tasks []*pb.Task
	testwait.For(t, 15*time.Second, "an enqueue and a claim", func() bool {
		if _, err := c.Enqueue(ictx, &pb.NewTask{Queue: "m", Payload: []byte("a")}, &pb.NewTask{Queue: "m", Payload: []byte("b")}); err != nil {
			return false
		}
		var err error
		tasks, err = c.Claim(ictx, &pb.ClaimRequest{Queue: "m", WorkerId: "w", MaxTasks: 1})
		return err == nil && len(tasks) == 1
	})
	if _, err := c.Heartbeat(ictx, &pb.HeartbeatItem{TaskId: tasks[0].GetId(), Fence: tasks[0].GetFence(), LeaseNs: int64(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ictx, &pb.SubmitRequest{TaskId: tasks[0].GetId(), Fence: tasks[0].GetFence() + 1, Outcome: pb.Outcome_OUTCOME_COMPLETED}); err == nil {
		t.Fatal("a forged fence was accepted")
	}

	var exprs []string
	rules, err := os.ReadFile("monitoring/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(rules), "\n") {
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:"); ok {
			exprs = append(exprs, e)
		}
	}
	raw, err := os.ReadFile("monitoring/grafana.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	used := usedNames(exprs)
	if len(used) < 20 {
		t.Fatalf("only %d metric names found in the dashboard and rules: %v", len(used), used)
	}
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		have := served(t, "http://"+debug+"/metrics")
		missing = missing[:0]
		for _, n := range used {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dashboard or the alert rules use metrics /metrics does not serve: %v", missing)
		}
		time.Sleep(50 * time.Millisecond) // polling a scrape; no state to wait on
	}
}

// shippedExprs returns every PromQL expression of the shipped dashboard
// (by panel title) and alert rules (by "alerts.yml").
func shippedExprs(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	rules, err := os.ReadFile("monitoring/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(rules), "\n") {
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:"); ok {
			out["alerts.yml"] = append(out["alerts.yml"], strings.TrimSpace(e))
		}
	}
	raw, err := os.ReadFile("monitoring/grafana.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out[p.Title] = append(out[p.Title], tg.Expr)
		}
	}
	return out
}

var (
	// queueSeries are the per-queue families: replicated state, so every
	// node exports the same value for a queue.
	queueSeries = regexp.MustCompile(`\bdocket_queue_[a-z_]+`)
	maxBy       = regexp.MustCompile(`max by \(([^)]*)\)`)
)

// Test_DashboardCountsEachQueueOnce: every node exports the same
// docket_queue_* series for a queue, so an expression over them first
// takes one node's value per queue (max by queue and tenant) and only
// then adds queues up. "Tasks by state" took max by (state) and showed
// the largest queue's count (225 pending where the cluster held 509); a
// plain sum would count each queue once per node.
func Test_DashboardCountsEachQueueOnce(t *testing.T) {
	checked := 0
	for where, exprs := range shippedExprs(t) {
		for _, e := range exprs {
			names := queueSeries.FindAllString(e, -1)
			if len(names) == 0 || (len(names) == 1 && names[0] == "docket_queue_series_dropped") {
				continue
			}
			checked++
			ok := false
			for _, m := range maxBy.FindAllStringSubmatch(e, -1) {
				labels := map[string]bool{}
				for _, l := range strings.Split(m[1], ",") {
					labels[strings.TrimSpace(l)] = true
				}
				ok = ok || (labels["queue"] && labels["tenant"])
			}
			if !ok {
				t.Errorf("%s: %q reads per-queue series without taking one node's value per queue (max by (queue, tenant, ...))", where, e)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("only %d expressions over docket_queue_* series found", checked)
	}
}
