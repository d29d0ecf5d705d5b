// Command jepsen is Docket's chaos harness: it runs docket agents in
// network namespaces, drives a workload, injects faults and checks the
// history. See package github.com/dockethq/docket/jepsen.
//
//	jepsen smoke  [--bin bin/docket] [--upgrade-from bin/docket-level3] [--out DIR]
//	              four 3-node scenarios of ~90 s, and a short rolling upgrade
//	jepsen run    [--nodes 5] [--faults all] [--duration 30m] [--seed N] [--overlap 2] [--upgrade-from PATH] [--log-store bolt|wal]
//
// Both run the cluster with mutual TLS and tokens unless --insecure.
//
//	jepsen planted [--bin bin/docket-planted] [--release-bin bin/docket] [--only FAULTS]
//	              one short scenario per planted fault, and once without one
//	jepsen check  DIR                                  re-check DIR/history.jsonl
//
// workload, leader, health, view and leave are internal verbs run inside
// the control namespace.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dockethq/docket/jepsen"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: jepsen smoke|run|check|workload|leader [flags]")
		os.Exit(2)
	}
	var err error
	failed := false
	ctx := context.Background()
	switch os.Args[1] {
	case "smoke":
		failed, err = smoke(ctx, os.Args[2:], log)
	case "run":
		failed, err = runLong(ctx, os.Args[2:], log)
	case "planted":
		failed, err = planted(ctx, os.Args[2:], log)
	case "check":
		failed, err = check(os.Args[2:])
	case "workload":
		err = workload(ctx, os.Args[2:], log)
	case "leader":
		err = leader(ctx, os.Args[2:])
	case "health":
		err = health(ctx, os.Args[2:])
	case "view":
		err = view(ctx, os.Args[2:])
	case "leave":
		err = leave(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown verb %q", os.Args[1])
	}
	if err != nil {
		log.Error("jepsen", "err", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(3)
	}
}

type common struct {
	bin, out string
	seed     uint64
	lease    time.Duration
	insecure bool
	fair     bool // the fair-queue workload (jepsen/fair.go)
}

func commonFlags(fs *flag.FlagSet) *common {
	c := &common{}
	fs.StringVar(&c.bin, "bin", "bin/docket", "the docket binary to test")
	fs.StringVar(&c.out, "out", "jepsen/reports", "reports go in a new directory under this one")
	fs.Uint64Var(&c.seed, "seed", 0, "random seed (0: pick one and print it)")
	fs.DurationVar(&c.lease, "lease", 2*time.Second, "lease the workers claim with; they heartbeat every lease/4")
	fs.BoolVar(&c.fair, "fair", false, "also run the fair-queue workload and its per-key-limit and fairness checkers (needs a build with feature level 16)")
	fs.BoolVar(&c.insecure, "insecure", false, "run the nodes and clients in plaintext without tokens, for comparison (default: mutual TLS, --auth, role tokens)")
	return c
}

func (c *common) config(name string, nodes int, faults []string, d time.Duration) (jepsen.RunConfig, error) {
	bin, err := filepath.Abs(c.bin)
	if err != nil {
		return jepsen.RunConfig{}, fmt.Errorf("bin: %w", err)
	}
	if _, err := os.Stat(bin); err != nil {
		return jepsen.RunConfig{}, fmt.Errorf("docket binary: %w (make build)", err)
	}
	self, err := os.Executable()
	if err != nil {
		return jepsen.RunConfig{}, fmt.Errorf("own path: %w", err)
	}
	if c.seed == 0 {
		c.seed = rand.Uint64() >> 1
	}
	out, err := filepath.Abs(c.out)
	if err != nil {
		return jepsen.RunConfig{}, fmt.Errorf("out: %w", err)
	}
	dir := filepath.Join(out, time.Now().UTC().Format("20060102T150405")+"-"+name)
	return jepsen.RunConfig{Name: name, Nodes: nodes, Faults: faults, Duration: d, Seed: c.seed, Bin: bin, Self: self,
		ReportDir: dir, Insecure: c.insecure, Fair: c.fair, Producers: 2, Workers: 6, Lease: c.lease,
		HoldMin: 6 * time.Second, HoldMax: 14 * time.Second, Quiet: 8 * time.Second,
		EnqueueEvery: 200 * time.Millisecond, DrainTimeout: 2 * time.Minute}, nil
}

func report(log *slog.Logger, res *jepsen.RunResult) {
	for _, r := range res.Results {
		log.Info("checker", "name", r.Name, "verdict", r.Verdict, "checked", r.Checked, "note", r.Note)
		for _, v := range r.Violations {
			log.Error("violation", "checker", r.Name, "what", v)
		}
	}
	fmt.Printf("report: %s/index.html (%d operations, valid=%v)\n", res.Dir, res.Ops, !res.Failed)
}

// smoke runs the four CI scenarios on 3 nodes, after one preflight of
// every fault they name: a missing tool fails before the first scenario.
func smoke(ctx context.Context, args []string, log *slog.Logger) (bool, error) {
	fs := flag.NewFlagSet("smoke", flag.ContinueOnError)
	c := commonFlags(fs)
	d := fs.Duration("duration", 80*time.Second, "fault time per scenario")
	up := fs.String("upgrade-from", "bin/docket-level3", "the older binary the rolling-upgrade scenario starts on (make jepsen-smoke builds it)")
	upD := fs.Duration("upgrade-duration", 60*time.Second, "fault time of the rolling-upgrade scenario")
	only := fs.Bool("preflight-only", false, "check the tools, root and each fault, then stop (make runs it before taking the heavy lock)")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	// rolling-upgrade starts on the older binary, upgrades every node once
	// under the workload, then kills nodes of the upgraded cluster.
	// partition-kill names raft-wal: kill -9 of a node that rejoins with
	// uncommitted entries truncates its log tail, which lost raft-wal
	// v0.4.0 a node. corrupt names bolt, the store new nodes no longer
	// get, so that raft.db (which the corrupt fault damages too) stays
	// covered; the others run on the agent's default (wal).
	scenarios := []struct {
		name     string
		faults   []string
		upgrade  bool
		logStore string
	}{
		{"partition-kill-wal", []string{jepsen.FaultHalves, jepsen.FaultKill}, false, "wal"},
		{"pause-loss", []string{jepsen.FaultPause, jepsen.FaultLoss}, false, ""},
		{"leader-clock", []string{jepsen.FaultLeader, jepsen.FaultClock}, false, ""},
		{"corrupt", []string{jepsen.FaultCorrupt}, false, "bolt"},
		{"rolling-upgrade", []string{jepsen.FaultKill}, true, ""},
	}
	oldBin, err := filepath.Abs(*up)
	if err != nil {
		return false, fmt.Errorf("upgrade-from: %w", err)
	}
	if _, err := os.Stat(oldBin); err != nil && !*only {
		return false, fmt.Errorf("older binary for the rolling upgrade: %w (make build-level LEVEL=3)", err)
	}
	var all []string
	for _, s := range scenarios {
		all = append(all, s.faults...)
	}
	if err := jepsen.Preflight(ctx, all); err != nil {
		return false, err
	}
	if *only {
		fmt.Println("jepsen smoke: preflight passed")
		return false, nil
	}
	failed := false
	var dirs []string
	for _, s := range scenarios {
		cfg, err := c.config(s.name, 3, s.faults, *d)
		if err != nil {
			return false, err
		}
		cfg.LogStore = s.logStore
		if s.upgrade {
			cfg.OldBin, cfg.Duration = oldBin, *upD
			cfg.Coverage = jepsen.DefaultCoverage(s.faults, jepsen.SmokeMinWindows)
			cfg.Coverage.Once = []string{jepsen.FaultUpgrade}
		}
		log.Info("scenario", "name", s.name, "seed", cfg.Seed, "secure", !cfg.Insecure, "log_store", cfg.LogStore, "report", cfg.ReportDir)
		t0 := time.Now()
		res, err := jepsen.Run(ctx, cfg, log)
		if res != nil {
			report(log, res)
			log.Info("scenario done", "name", s.name, "secure", !cfg.Insecure, "valid", !res.Failed,
				"ops", res.Ops, "took", time.Since(t0).Round(time.Second))
			failed = failed || res.Failed
			dirs = append(dirs, res.Dir)
		}
		if err != nil {
			return failed, fmt.Errorf("scenario %s: %w", s.name, err)
		}
		c.seed = 0
	}
	fmt.Printf("smoke reports:\n  %s\n", strings.Join(dirs, "\n  "))
	return failed, nil
}

// runLong is the long run: every fault, 5 nodes by default.
func runLong(ctx context.Context, args []string, log *slog.Logger) (bool, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c := commonFlags(fs)
	nodes := fs.Int("nodes", 5, "3 or 5")
	faults := fs.String("faults", "all", "comma-separated faults, or all: "+strings.Join(jepsen.AllFaults, ","))
	d := fs.Duration("duration", 30*time.Minute, "fault time")
	overlap := fs.Int("overlap", 2, "how many compatible faults may hold at once (1: serial)")
	up := fs.String("upgrade-from", "", "start on this older binary and upgrade every node under the workload first (TLS without --auth: the older build has no tokens)")
	minWin := fs.Int("min-windows", 0, "each fault must hold this often (0: 5 for 30 minutes or more, fewer for shorter runs)")
	logStore := fs.String("log-store", "", "every agent's --log-store: bolt or wal (default: the agent's, wal for a new data dir)")
	disk := fs.String("disk", "", "each node's loop-mounted data image, e.g. 512M (with lost-unfsynced-writes; default 2G on wal, 512M on bolt); the report's disk.json has each node's peak use")
	logMax := fs.String("log-max-bytes", "", "every agent's --log-max-bytes, e.g. 128MiB (default: the agent's)")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	fl := jepsen.AllFaults
	if *faults != "all" {
		fl = strings.Split(*faults, ",")
	}
	cfg, err := c.config("long", *nodes, fl, *d)
	if err != nil {
		return false, err
	}
	cfg.Quiet = 6 * time.Second // more of the run under a fault
	cfg.LogStore = *logStore
	cfg.DiskSize, cfg.LogMaxBytes = *disk, *logMax
	cfg.Overlap = *overlap
	// Twelve faults come round about every five minutes on 5 nodes (the
	// rolling restart alone takes about a minute): a shorter run cannot
	// hold each five times.
	mw := *minWin
	if mw == 0 {
		mw = max(1, min(jepsen.LongMinWindows, int(d.Minutes()/6)))
	}
	cfg.Coverage = jepsen.DefaultCoverage(fl, mw)
	if *up != "" {
		if cfg.OldBin, err = filepath.Abs(*up); err != nil {
			return false, fmt.Errorf("upgrade-from: %w", err)
		}
		cfg.Coverage.Once = []string{jepsen.FaultUpgrade}
	}
	// Five nodes commit more slowly: more workers, slower producers, and a
	// drain long enough for any backlog a 45-minute run leaves.
	cfg.Workers, cfg.EnqueueEvery, cfg.DrainTimeout = 8, 300*time.Millisecond, 15*time.Minute
	log.Info("long run", "seed", cfg.Seed, "secure", !cfg.Insecure, "nodes", *nodes, "duration", *d, "overlap", cfg.Overlap,
		"upgrade_from", cfg.OldBin, "log_store", cfg.LogStore, "min_windows", mw, "report", cfg.ReportDir)
	res, err := jepsen.Run(ctx, cfg, log)
	if res != nil {
		report(log, res)
	}
	return res != nil && res.Failed, err
}

func check(args []string) (bool, error) {
	if len(args) != 1 {
		return false, errors.New("usage: jepsen check REPORT_DIR")
	}
	h, _, err := jepsen.ReadHistoryFile(filepath.Join(args[0], "history.jsonl"))
	if err != nil {
		return false, err
	}
	cfg := jepsen.RunConfig{Name: "recheck", ReportDir: args[0]}
	if b, err := os.ReadFile(filepath.Join(args[0], "results.json")); err == nil {
		var s jepsen.Summary // keep what the run recorded about itself
		if json.Unmarshal(b, &s) == nil && s.Scenario != "" {
			d, _ := time.ParseDuration(s.Duration)
			cfg.Name, cfg.Seed, cfg.Nodes, cfg.Faults, cfg.Duration, cfg.Coverage = s.Scenario, s.Seed, s.Nodes, s.Faults, d, s.Coverage
			cfg.Insecure = !s.TLS // runs from before the secure mode were plain
			cfg.Overlap, cfg.OldBin, cfg.LogStore, cfg.Plant = s.Overlap, s.UpgradeFrom, s.LogStore, s.Plant
		}
	}
	res, err := jepsen.WriteResults(cfg, h)
	if err != nil {
		return false, err
	}
	report(slog.Default(), res)
	return res.Failed, nil
}

func workload(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("workload", flag.ContinueOnError)
	var cfg jepsen.WorkloadConfig
	nodes := fs.String("nodes", "", "comma-separated gRPC addresses")
	fs.StringVar(&cfg.Out, "out", "", "history file")
	fs.DurationVar(&cfg.Duration, "duration", time.Minute, "main phase")
	fs.DurationVar(&cfg.Lease, "lease", 2*time.Second, "claim lease")
	fs.IntVar(&cfg.Producers, "producers", 2, "producers")
	fs.IntVar(&cfg.Workers, "workers", 4, "workers")
	fs.StringVar(&cfg.HealedFile, "healed-file", "", "created by the controller after the final heal")
	fs.DurationVar(&cfg.HealWait, "heal-wait", 120*time.Second, "longest wait for the heal")
	fs.DurationVar(&cfg.DrainQuiet, "drain-quiet", 10*time.Second, "drain ends after this long without a task")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 120*time.Second, "longest drain")
	fs.Float64Var(&cfg.StallProb, "stall", 0.1, "probability a worker stalls past its lease")
	fs.Float64Var(&cfg.NackProb, "nack", 0.05, "probability a worker nacks")
	fs.Float64Var(&cfg.RideProb, "ride", 0.5, "probability a worker's Submit claims its next task in the same call")
	fs.StringVar(&cfg.ProcPrefix, "proc-prefix", "", "prefix for process names in the history")
	fs.BoolVar(&cfg.Fair, "fair", false, "run the fair-queue loop (feature level 16)")
	fs.DurationVar(&cfg.EnqueueEvery, "enqueue-every", 200*time.Millisecond, "each producer's mean pause between enqueues")
	cfg.Creds.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Nodes = strings.Split(*nodes, ",")
	return jepsen.RunWorkload(ctx, cfg, log)
}

func leader(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("leader", flag.ContinueOnError)
	nodes := fs.String("nodes", "", "comma-separated gRPC addresses")
	to := fs.String("transfer-to", "", "first move leadership to this node id")
	var cr jepsen.Creds
	cr.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *to != "" {
		if _, err := jepsen.TransferTo(ctx, strings.Split(*nodes, ","), *to, cr); err != nil {
			return err
		}
	}
	id, err := jepsen.LeaderID(ctx, strings.Split(*nodes, ","), cr)
	if err != nil {
		return err
	}
	fmt.Println(id)
	return nil
}

func health(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	addr := fs.String("addr", "", "the node's gRPC address")
	var cr jepsen.Creds
	cr.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, err := jepsen.NodeHealth(ctx, *addr, cr)
	if err != nil {
		return err
	}
	fmt.Println(st)
	return nil
}

// view prints the cluster's configuration as JSON (jepsen.View).
func view(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("view", flag.ContinueOnError)
	nodes := fs.String("nodes", "", "comma-separated gRPC addresses")
	probe := fs.Bool("probe", false, "also try to create a token, to see whether the token level is on")
	var cr jepsen.Creds
	cr.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	v, err := jepsen.ClusterView(ctx, strings.Split(*nodes, ","), cr, *probe)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(v)
}

// leave makes one node leave the cluster for good.
func leave(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("leave", flag.ContinueOnError)
	addr := fs.String("addr", "", "the node's gRPC address")
	var cr jepsen.Creds
	cr.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return jepsen.LeaveNode(ctx, *addr, cr)
}
