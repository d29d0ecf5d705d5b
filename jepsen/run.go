package jepsen

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// RunConfig is one run of the harness: a fresh cluster, one scenario.
type RunConfig struct {
	Name      string   // scenario name, used in the report directory
	Nodes     int      // 3 or 5
	Faults    []string // the nemesis picks among these
	Duration  time.Duration
	Seed      uint64
	Bin       string // the docket binary
	Self      string // this harness binary (re-executed in the control namespace)
	ReportDir string // the run's report directory (created)
	Producers int
	Workers   int
	Lease     time.Duration
	HoldMin   time.Duration
	HoldMax   time.Duration
	Quiet     time.Duration
	// EnqueueEvery is each producer's mean pause; DrainTimeout bounds the
	// drain. Producers must not outrun the workers by more than a drain
	// can make up.
	EnqueueEvery time.Duration
	DrainTimeout time.Duration
	// Insecure runs the nodes and every client in plaintext without
	// tokens, for comparison; the default is mutual TLS and auth on.
	Insecure bool
	// Coverage is what the run must have done to pass (zero: the smoke's,
	// DefaultCoverage(Faults, SmokeMinWindows)).
	Coverage Coverage
	// Overlap is how many faults may hold at once (Nemesis.Overlap).
	Overlap int
	// OldBin, when set, is the older binary the cluster starts on; the
	// nemesis first upgrades every node to Bin, one at a time, under the
	// workload (FaultUpgrade), then goes on with Faults. Such a run has TLS
	// and gossip encryption but no --auth: the older build cannot create
	// tokens until the cluster latched the token level.
	OldBin string
	// LogStore is every agent's --log-store (bolt or wal); "" leaves the
	// agent's default (bolt).
	LogStore string
	// StallProb is the chance a worker stalls past its lease (workload
	// --stall); 0 keeps the workload's default.
	StallProb float64
	// Plant is DOCKET_PLANT in every agent's environment: the planted
	// faults a build with the plantedbugs tag turns on (planted.go). A
	// release build ignores it.
	Plant string
	// Fair runs the fair-queue workload and its checkers (fair.go;
	// workload --fair). It needs a build with feature level 16.
	Fair bool
	// DiskSize is each node's loop image (truncate -s syntax, e.g. 512M)
	// when the data dirs are loop-mounted; "" keeps loopImageSize's.
	// LogMaxBytes is every agent's --log-max-bytes ("" the agent's).
	DiskSize, LogMaxBytes string
}

// RunResult is what a run found.
type RunResult struct {
	Dir      string
	Results  []Result
	Failed   bool
	Ops      int
	Recovery []Recovery
}

// Run builds the network, starts the cluster and the workload, runs the
// nemesis, heals, waits for the drain, then checks and reports. The
// namespaces and processes are removed on every exit path, signals
// included.
func Run(ctx context.Context, cfg RunConfig, log *slog.Logger) (*RunResult, error) {
	if err := Preflight(ctx, cfg.Faults); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.ReportDir, 0o755); err != nil {
		return nil, fmt.Errorf("report dir: %w", err)
	}
	var b [3]byte
	_, _ = crand.Read(b[:])
	net := &Net{Prefix: "dj" + hex.EncodeToString(b[:]) + "-", N: cfg.Nodes, log: log}
	CleanLeftovers(ctx, log)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	defer net.Teardown(context.Background())
	if err := net.Setup(ctx); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "docket-jepsen-")
	if err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	defer os.RemoveAll(work)
	// Run a private copy of the binary: a rebuild of bin/docket during a long
	// run must not change what a restarted node runs.
	bin := filepath.Join(work, "docket")
	if _, err := run(ctx, "cp", cfg.Bin, bin); err != nil {
		return nil, fmt.Errorf("copy binary: %w", err)
	}
	c, err := newCluster(net, bin, work, log)
	if err != nil {
		return nil, err
	}
	c.LogStore = cfg.LogStore
	c.DiskSize, c.LogMaxBytes = cfg.DiskSize, cfg.LogMaxBytes
	if cfg.Plant != "" {
		c.Env = []string{"DOCKET_PLANT=" + cfg.Plant}
	}
	if cfg.OldBin != "" {
		old := filepath.Join(work, "docket-old")
		if _, err := run(ctx, "cp", cfg.OldBin, old); err != nil {
			return nil, fmt.Errorf("copy older binary: %w", err)
		}
		c.NewBin = bin
		for _, n := range c.Nodes {
			n.bin = old
		}
	}
	if !cfg.Insecure {
		if c.Sec, err = NewSecurity(ctx, bin, filepath.Join(work, "pki"), cfg.Nodes); err != nil {
			return nil, err
		}
		c.Sec.NoAuth = cfg.OldBin != ""
	}
	if slicesContains(cfg.Faults, FaultLostData) {
		if err := c.setupLoop(ctx); err != nil {
			return nil, err
		}
		c.Loop = true
		peak := c.watchDisk(ctx)
		defer func() { c.reportDisk(cfg.ReportDir, peak()) }()
	}
	defer c.teardownLoop()
	defer func() {
		for _, n := range c.Nodes {
			c.Stop(n, 5*time.Second)
		}
	}()
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			return nil, err
		}
	}
	var creds Creds
	if c.Sec != nil && c.Sec.NoAuth {
		creds = c.Sec.Creds()
	}
	if c.Sec != nil && !c.Sec.NoAuth {
		t0 := time.Now()
		if err := c.Sec.CreateTokens(ctx, c); err != nil {
			return nil, err
		}
		// Admin only for the final statuses: a keyspace hash reads every
		// tenant, which no role token of the workload's one tenant covers.
		creds = c.Sec.Creds(RoleProducer, RoleWorker, RoleReader, RoleAdmin)
		log.Info("secure mode: certificates and tokens ready", "took", time.Since(t0).Round(time.Millisecond))
	}

	nemPath := filepath.Join(work, "nemesis.jsonl")
	wlPath := filepath.Join(work, "workload.jsonl")
	healed := filepath.Join(work, "healed")
	rec, err := NewRecorder(nemPath)
	if err != nil {
		return nil, err
	}
	defer rec.Close()

	wlLog, err := os.Create(filepath.Join(cfg.ReportDir, "workload.log"))
	if err != nil {
		return nil, fmt.Errorf("workload log: %w", err)
	}
	defer wlLog.Close()
	drainTimeout := cfg.DrainTimeout
	wlArgs := []string{"netns", "exec", net.CtlNS(), cfg.Self, "workload",
		"--nodes", strings.Join(c.GRPCAddrs(), ","), "--out", wlPath, "--duration", cfg.Duration.String(),
		"--lease", cfg.Lease.String(), "--producers", fmt.Sprint(cfg.Producers), "--workers", fmt.Sprint(cfg.Workers),
		"--healed-file", healed, "--enqueue-every", cfg.EnqueueEvery.String(), "--drain-timeout", drainTimeout.String(),
		"--drain-quiet", (c.ReapGrace + 2*cfg.Lease + 3*time.Second).String()}
	if cfg.StallProb > 0 {
		wlArgs = append(wlArgs, "--stall", fmt.Sprint(cfg.StallProb))
	}
	if cfg.Fair {
		wlArgs = append(wlArgs, "--fair")
	}
	wl := exec.CommandContext(ctx, "ip", append(wlArgs, creds.Args()...)...)
	wl.Env = withoutSecrets(os.Environ())
	wl.Stdout, wl.Stderr = wlLog, wlLog
	wl.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	wlStart := time.Now()
	if err := wl.Start(); err != nil {
		return nil, fmt.Errorf("start workload: %w", err)
	}
	wlDone := make(chan error, 1)
	go func() { wlDone <- wl.Wait() }()

	nem := &Nemesis{C: c, Rec: rec, Rand: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), Self: cfg.Self,
		Faults: append([]string(nil), cfg.Faults...), HoldMin: cfg.HoldMin, HoldMax: cfg.HoldMax, Quiet: cfg.Quiet, log: log,
		Overlap: cfg.Overlap}
	if cfg.OldBin != "" {
		nem.First = []string{FaultUpgrade}
	}
	// The workload first waits for a leader; give it a few seconds so the
	// first fault does not hit a cluster that is still forming.
	sleepCtx(ctx, 5*time.Second)
	if err := nem.Run(ctx, wlStart.Add(cfg.Duration)); err != nil {
		// Recorded in the history: the coverage checker fails the run.
		log.Error("nemesis stopped", "err", err)
	}
	rec.Record(Event{Proc: "nemesis", Type: Start, F: FNemesis, Fault: "final-heal"})
	nem.HealAll(context.Background())
	rec.Record(Event{Proc: "nemesis", Type: Stop, F: FNemesis, Fault: "final-heal"})
	if f, err := os.Create(healed); err == nil {
		f.Close()
	}
	log.Info("final heal done; draining")

	var wlErr error
	select {
	case wlErr = <-wlDone:
	case <-time.After(time.Until(wlStart.Add(cfg.Duration + drainTimeout + 150*time.Second))):
		_ = wl.Process.Kill()
		wlErr = errors.Join(errors.New("workload did not finish in time"), <-wlDone)
	case <-ctx.Done():
		_ = wl.Process.Kill()
		<-wlDone
		wlErr = ctx.Err()
	}
	for _, n := range c.Nodes {
		c.Stop(n, 5*time.Second)
	}
	if err := rec.Close(); err != nil {
		log.Warn("nemesis history", "err", err)
	}
	if err := copyLogs(c, cfg.ReportDir); err != nil {
		log.Warn("copy node logs", "err", err)
	}
	res, err := Report(cfg, []string{wlPath, nemPath})
	if err != nil {
		return nil, errors.Join(err, wlErr)
	}
	if wlErr != nil {
		return res, fmt.Errorf("workload: %w (see %s)", wlErr, filepath.Join(cfg.ReportDir, "workload.log"))
	}
	return res, nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func copyLogs(c *Cluster, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			return fmt.Errorf("node log %s: %w", n.ID, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "logs", n.ID+".log"), b, 0o644); err != nil {
			return fmt.Errorf("node log %s: %w", n.ID, err)
		}
	}
	return nil
}
