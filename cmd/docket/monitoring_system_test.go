//go:build system

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Test_SystemAlertRulesPassPromtool: Prometheus itself accepts the shipped
// alert rules. .ci/run installs promtool (Debian's prometheus package).
func Test_SystemAlertRulesPassPromtool(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install Debian's prometheus package (apt-get install prometheus)")
	}
	out, err := exec.Command(bin, "check", "rules", "monitoring/alerts.yml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// Test_SystemTasksByStateCountsTheCluster evaluates the shipped "Tasks by
// state" expression with promtool over what three nodes export for two
// queues (the same replicated counts on each): it must show the cluster's
// total per state, 509 pending, not one queue's 300 nor three nodes' 1527.
func Test_SystemTasksByStateCountsTheCluster(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install Debian's prometheus package (apt-get install prometheus)")
	}
	exprs := shippedExprs(t)["Tasks by state"]
	if len(exprs) != 1 {
		t.Fatalf("Tasks by state has %d expressions", len(exprs))
	}
	var series strings.Builder
	for _, node := range []string{"n1", "n2", "n3"} {
		for _, q := range []struct {
			name             string
			pending, waiting int
		}{{"a", 300, 4}, {"b", 209, 0}} {
			for state, v := range map[string]int{"pending": q.pending, "waiting": q.waiting} {
				fmt.Fprintf(&series, "      - series: 'docket_queue_tasks{job=\"docket\",instance=%q,queue=%q,tenant=\"default\",state=%q}'\n        values: '%dx3'\n",
					node, q.name, state, v)
			}
		}
	}
	expr, err := json.Marshal(exprs[0]) // a JSON string is a YAML string
	if err != nil {
		t.Fatal(err)
	}
	test := fmt.Sprintf(`rule_files: []
tests:
  - interval: 1m
    input_series:
%s    promql_expr_test:
      - expr: %s
        eval_time: 1m
        exp_samples:
          - labels: '{state="pending"}'
            value: 509
          - labels: '{state="waiting"}'
            value: 4
`, series.String(), expr)
	file := filepath.Join(t.TempDir(), "tasks_by_state_test.yml")
	if err := os.WriteFile(file, []byte(test), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "test", "rules", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s\n%s", err, out, test)
	}
}
