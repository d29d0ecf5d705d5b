//go:build system

package jepsen

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dockethq/docket/client"
)

// Test_SystemFeatureWorkload runs the feature workload for 20 s against a
// one-node secure cluster (TLS and role tokens) with no fault, and every
// feature checker must pass with its minimum met: the workload uses the
// real API fields, with the tokens the long run gives it, and does enough
// in a short run for the smoke.
func Test_SystemFeatureWorkload(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, sec, addr := mustSecureNode(ctx, t, true)
	if err := sec.createTokens(ctx, []string{bin}, []string{addr}); err != nil {
		t.Fatal(err)
	}
	cfg := WorkloadConfig{Nodes: []string{addr}, Lease: 2 * time.Second, DrainQuiet: 6 * time.Second,
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
		defer c.Close()
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
	for _, r := range []Result{CheckLimits(h), CheckRetries(h), CheckSnooze(h), CheckCancel(h), CheckTimeouts(h)} {
		t.Logf("%s: %s checked %d: %s", r.Name, r.Verdict, r.Checked, r.Note)
		if r.Verdict != Pass {
			t.Errorf("%s: %s %v", r.Name, r.Verdict, r.Violations)
		}
	}
}
