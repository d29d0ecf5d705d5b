//go:build system

package jepsen

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
)

// featureChecks are the feature workload's checkers.
func featureChecks(h *History) []Result {
	return []Result{CheckLimits(h), CheckRetries(h), CheckSnooze(h), CheckCancel(h), CheckTimeouts(h)}
}

// Test_SystemFeatureWorkload runs the feature workload for 20 s against a
// one-node secure cluster (TLS and role tokens) with no fault, and every
// feature checker must pass with its minimum met: the workload uses the
// real API fields, with the tokens the long run gives it, and does enough
// in a short run for the smoke.
func Test_SystemFeatureWorkload(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, r := range featureChecks(runFeatures(ctx, t, mustBuildDocket(t), nil)) {
		t.Logf("%s: %s checked %d: %s", r.Name, r.Verdict, r.Checked, r.Note)
		if r.Verdict != Pass {
			t.Errorf("%s: %s %v", r.Name, r.Verdict, r.Violations)
		}
	}
}

// Test_SystemFeatureCheckersCatchPlanted runs the same on the planted
// build with one fault on at a time, and the named checker must fail:
//   - submit-ignores-fence accepts the late Submit of a claim that its
//     execution timeout ended (FAILED): execution-timeout;
//   - requeue-forgets-task parks every nacked or expired task a century
//     ahead, so no task of the retry queue is delivered a second time,
//     let alone dead-lettered after three: retries (by its minimum).
func Test_SystemFeatureCheckersCatchPlanted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "docket-planted")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "plantedbugs", "-o", bin, "github.com/dockethq/docket/cmd/docket")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the planted docket: %v\n%s", err, out)
	}
	for plant, catch := range map[string]string{PlantSubmitIgnoresFence: "execution-timeout", PlantRequeueForgetsTask: "retries"} {
		caught := false
		for _, r := range featureChecks(runFeatures(ctx, t, bin, []string{PlantEnv + "=" + plant})) {
			t.Logf("%s: %s: %s checked %d: %s %.200v", plant, r.Name, r.Verdict, r.Checked, r.Note, r.Violations)
			caught = caught || (r.Name == catch && r.Verdict == Violate)
		}
		if !caught {
			t.Errorf("planted %s was not caught by %s", plant, catch)
		}
	}
}

// runFeatures runs the feature workload for 20 s and its drain against a
// one-node secure cluster on bin (env added to the agent's), and returns
// the history.
func runFeatures(ctx context.Context, t *testing.T, bin string, env []string) *History {
	t.Helper()
	sec, addr := startSecureNode(ctx, t, bin, true, env)
	if err := sec.createTokens(ctx, []string{bin}, []string{addr}); err != nil {
		t.Fatal(err)
	}
	cfg := WorkloadConfig{Nodes: []string{addr}, Lease: 2 * time.Second, DrainQuiet: 6 * time.Second, RideProb: 0.5,
		DrainTimeout: time.Minute, Creds: sec.Creds(RoleProducer, RoleWorker, RoleReader, RoleAdmin)}
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := NewRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	w := &workload{cfg: cfg, rec: rec, log: slog.New(slog.NewTextHandler(os.Stderr, nil)), xknown: map[string][]string{}}
	for role, cl := range map[string]**client.Client{RoleProducer: &w.cl, RoleWorker: &w.wcl, RoleAdmin: &w.acl} {
		c, err := newRoleClient(ctx, cfg, role)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		*cl = c
	}
	if err := w.waitLeader(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	mainCtx, stopMain := context.WithTimeout(ctx, 20*time.Second)
	defer stopMain()
	done := make(chan struct{})
	go func() { defer close(done); w.features(mainCtx, ctx) }()
	<-mainCtx.Done()
	w.draining.Store(true)
	<-done
	w.xreadAll(ctx)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	h, _, err := ReadHistoryFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
