//go:build system

package main

import (
	"os/exec"
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
