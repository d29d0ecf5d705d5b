package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster/raftlog"
	"github.com/dockethq/docket/cmd/docket/localcluster"
)

// ErrUsage marks a bad command line.
var ErrUsage = errors.New("usage")

// Config is one benchmark run.
type Config struct {
	Workload    string
	Addr        string // existing cluster; empty starts a local one
	BasePort    int
	Concurrency int
	Payload     int
	Batch       int // tasks per Enqueue
	ClaimBatch  int // tasks per Claim
	// SubmitClaims: drain and cycle workers claim their next tasks with
	// each step's submits, in one call (client.SubmitAndClaim).
	SubmitClaims bool
	Producers    int // cycle
	Workers      int // cycle: worker slots
	Leases       int // heartbeat: leases held
	Duration     time.Duration
	Count        int // stop after this many ops (0: duration only)
	Trials       int // failover
	Backlog      int // backlog: pending tasks
	// AgentExe is the docket binary the local cluster's nodes run
	// (default: this one), to compare server builds under one load
	// generator.
	AgentExe string
	// Pairs, with AgentExeB, runs the workload Pairs times against the
	// nodes of AgentExe (A) and of AgentExeB (B) by turns (pairs.go).
	Pairs     int
	AgentExeB string
	// DuringCheck: backlog waits for a consistency check to hash before
	// its backlog sample, and summarises the claims taken while one did.
	DuringCheck bool
	Lease       time.Duration
	Ceiling     bool // also run the raft-ceiling at the same concurrency
	JSON        bool
	Keep        bool
	CPUProfile  string // write the bench process's own CPU profile here
	Queue       string
	SharedRPCs  int      // client.WithSharedRPCs; -1: the client's defaults
	SharedEnq   int      // client.WithSharedRPCsOf(EnqueueRPCs); -1: as SharedRPCs
	AgentArgs   []string // extra `docket agent` flags for the local cluster
	// Procs is where the raft ceiling's three servers run: 1, this
	// process; 3, a process each (groups.go). Groups is how many
	// independent Raft groups the 3-process ceiling runs.
	Procs, Groups int
	// LogStore is the local cluster's and the ceiling's Raft log store
	// (raftlog.LogStoreBolt or raftlog.LogStoreWAL).
	LogStore string
	// TLS runs the local cluster (and the ceiling's Raft) with throwaway
	// certificates; TLSCA, TLSCert and TLSKey reach an --addr cluster.
	TLS bool
	// Auth runs the local cluster with --auth; the bench then calls it
	// with the bootstrap admin token, as a production client would.
	Auth                   bool
	TLSCA, TLSCert, TLSKey string
	// Token is the bearer token sent to an --addr cluster run with --auth
	// (--token, or DOCKET_TOKEN). Never in the report.
	Token string
	// RandomPayload makes every payload byte pseudo-random: nothing on the
	// way (Pebble's block compression) can shrink it, as with encrypted or
	// compressed bodies. The default pattern compresses to almost nothing.
	RandomPayload bool
	// Retention is how long every enqueued task is kept once finished
	// (0: the server's default). 1ns makes the life that keeps nothing:
	// the leader's next purge deletes the task, as the rule book's
	// retention 0 would.
	Retention time.Duration
	// Fair queues (feature level 16; fair.go). TaskKeys: every enqueued
	// task gets one of this many keys, round robin (0: none). Order
	// ("fifo", "fair"; "": leave it) and MaxRunningPerKey (nil: leave
	// it; 0 clears it) are set on the queue before the workload.
	TaskKeys         int
	Order            string
	MaxRunningPerKey *uint32
	// fairGiven: one of the three flags was given, even as 0, so the
	// report states all three.
	fairGiven bool
}

// Workloads lists what --workload accepts.
var Workloads = []string{"enqueue", "drain", "cycle", "heartbeat", "failover", "requeue", "backlog", "ceiling"}

// Header says what ran, where and when: the first fields of a report.
type Header struct {
	Workload string         `json:"workload"`
	Started  time.Time      `json:"started"`
	Command  string         `json:"command"`
	Machine  Machine        `json:"machine"`
	Config   map[string]any `json:"config"`
}

// newHeader is the header of a run of cfg started now from args.
func newHeader(cfg Config, args []string) Header {
	return Header{Workload: cfg.Workload, Started: time.Now().UTC(), Command: "docket bench " + strings.Join(redactToken(args), " "),
		Machine: Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadavg()}, Config: cfg.describe()}
}

// Report is the result of a run; --json prints it.
type Report struct {
	Header
	Ops     []Summary `json:"ops"`
	Ceiling *Summary  `json:"raft_ceiling,omitempty"`
	// CeilingFraction is the main op's item rate over the ceiling's.
	CeilingFraction float64        `json:"ceiling_fraction,omitempty"`
	Extra           map[string]any `json:"extra,omitempty"`
	// fair is the text report's fair-queue line (Config.fairText); the
	// JSON has the same in Config.
	fair string
}

// Machine is where the numbers came from.
type Machine struct {
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go"`
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`
}

// Run parses args and runs the benchmark. exe is the docket binary, used
// to start the local cluster's nodes.
func Run(ctx context.Context, exe string, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "ceiling-node" {
		return runCeilingNode(ctx, args[1:], os.Stdin, stdout, stderr)
	}
	cfg, err := parse(args, stderr)
	if err != nil {
		return err
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if cfg.Pairs > 0 {
		return pairs(ctx, cfg, exe, args, stdout, stderr)
	}
	rep := &Report{Header: newHeader(cfg, args), Extra: map[string]any{}, fair: cfg.fairText()}
	r := &runner{cfg: cfg, rep: rep, stderr: stderr}
	if err := r.run(ctx, exe); err != nil {
		return err
	}
	rep.Machine.LoadEnd = loadavg()
	return emit(stdout, cfg.JSON, rep, func(w io.Writer) { printTable(w, rep) })
}

// emit prints rep as indented JSON (--json), or else as table prints it.
func emit(w io.Writer, asJSON bool, rep any, table func(io.Writer)) error {
	if !asJSON {
		table(w)
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return nil
}

func parse(args []string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := Config{}
	var agentArgs string
	var maxPerKey int
	fs.StringVar(&c.Workload, "workload", "enqueue", "one of "+strings.Join(Workloads, ", "))
	fs.StringVar(&c.Addr, "addr", "", "comma-separated node addresses of an existing cluster (default: start a fresh local 3-node cluster)")
	fs.IntVar(&c.BasePort, "base-port", 7640, "local cluster: node i serves gRPC on base+i, Raft on base+100+i and pprof on base+200+i, on 127.0.0.1")
	fs.IntVar(&c.Concurrency, "c", 16, "concurrent callers (enqueue, drain, heartbeat, failover, ceiling)")
	fs.IntVar(&c.Payload, "payload", 128, "payload bytes per task")
	fs.DurationVar(&c.Retention, "retention", 0, "how long every enqueued task is kept once finished (0: the server's default, 24h; 1ns: purged at the leader's next purge, a life that keeps nothing)")
	fs.BoolVar(&c.RandomPayload, "payload-random", false, "pseudo-random payload bytes, which no compression shrinks (default: a repeating a-z pattern, which Pebble compresses to almost nothing)")
	fs.IntVar(&c.Batch, "batch", 1, "tasks per Enqueue call")
	fs.IntVar(&c.ClaimBatch, "claim-batch", 1, "tasks per Claim call (drain, cycle)")
	fs.BoolVar(&c.SubmitClaims, "submit-claims", true, "drain, cycle: a worker claims its next tasks in the same call (and Raft entry) as it submits the last ones (SubmitBatch with a claim); false: a Claim, then a Submit or SubmitBatch")
	fs.IntVar(&c.Producers, "producers", 64, "cycle: concurrent producers")
	fs.IntVar(&c.Workers, "workers", 256, "cycle: worker slots (tasks held at once)")
	fs.IntVar(&c.Leases, "leases", 1000, "heartbeat: leases held and extended")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "how long to run (every workload is also bounded by --count)")
	fs.IntVar(&c.Count, "count", 0, "stop after this many operations (0: run for --duration); drain: tasks to fill (default 50000); requeue: leases to let expire (default 100); backlog: claims per latency sample (default 2000)")
	fs.IntVar(&c.Trials, "trials", 10, "failover: leader kills")
	fs.IntVar(&c.Backlog, "backlog", 1_000_000, "backlog: pending tasks to build")
	fs.StringVar(&c.AgentExe, "agent-exe", "", "local cluster: run the nodes from this docket binary (default: this one), to compare two server builds under the same load generator")
	fs.IntVar(&c.Pairs, "pairs", 0, "compare two server builds: run the workload this many times against the nodes of --agent-exe (A, default this binary) and of --agent-exe-b (B) by turns, A first in odd pairs and B in even ones, and report each pair's B/A and the medians (no raft ceiling)")
	fs.StringVar(&c.AgentExeB, "agent-exe-b", "", "--pairs: the docket binary of build B's nodes")
	fs.BoolVar(&c.DuringCheck, "during-check", false, "backlog: wait until a node hashes for a consistency check before the backlog's claim sample, and report the claims taken while one hashed apart (reads the nodes' /metrics; not with --tls --auth)")
	fs.DurationVar(&c.Lease, "lease", 30*time.Second, "lease of claims (requeue uses it as the lease that must expire)")
	fs.BoolVar(&c.Ceiling, "ceiling", true, "also measure the raft ceiling (no-op FSM) at the same concurrency and entry size")
	fs.BoolVar(&c.JSON, "json", false, "print the report as JSON")
	fs.BoolVar(&c.Keep, "keep", false, "keep the local cluster's data dir and logs")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write this process's (the load generator's) CPU profile of the measured workload to this file")
	fs.StringVar(&c.Queue, "queue", "bench", "queue name")
	fs.IntVar(&c.SharedRPCs, "shared-rpcs", -1, "client: RPCs of each kind (Enqueue, Submit, Claim, Heartbeat) in flight before concurrent calls share one; 0 turns sharing off; -1: the client's defaults ("+fmt.Sprint(client.DefaultShareInflightEnqueue)+" for Enqueue, "+fmt.Sprint(client.DefaultShareInflight)+" for the others)")
	fs.IntVar(&c.SharedEnq, "shared-enqueue-rpcs", -1, "client: --shared-rpcs for Enqueue RPCs alone; -1: as --shared-rpcs")
	fs.IntVar(&c.Procs, "procs", 1, "raft ceiling: its three servers in this process (1) or a process each (3)")
	fs.IntVar(&c.Groups, "groups", 1, "raft ceiling with --procs 3: independent Raft groups, leaders spread over the processes; -c callers are split over them")
	fs.StringVar(&c.LogStore, "log-store", raftlog.DefaultForNew, "local cluster and raft ceiling: Raft log store, wal or bolt")
	fs.StringVar(&agentArgs, "agent-args", "", "extra space-separated 'docket agent' flags for the local cluster's nodes, e.g. \"--max-append-entries 1024\"")
	fs.BoolVar(&c.TLS, "tls", false, "local cluster: run it (and the raft ceiling) with TLS, from throwaway certificates")
	fs.BoolVar(&c.Auth, "auth", false, "local cluster: run it with --auth (bearer tokens checked on every call) and call it with a minted admin token")
	fs.StringVar(&c.TLSCA, "tls-ca", os.Getenv("DOCKET_TLS_CA"), "--addr cluster: PEM file of its CA (env DOCKET_TLS_CA)")
	fs.StringVar(&c.TLSCert, "tls-cert", os.Getenv("DOCKET_TLS_CERT"), "--addr cluster: client certificate (env DOCKET_TLS_CERT)")
	fs.StringVar(&c.TLSKey, "tls-key", os.Getenv("DOCKET_TLS_KEY"), "--addr cluster: client certificate's key (env DOCKET_TLS_KEY)")
	fs.StringVar(&c.Token, "token", "", "--addr cluster: bearer token for a cluster run with --auth (env "+envToken+", which keeps it out of ps)")
	fs.IntVar(&c.TaskKeys, "task-keys", 0, "every enqueued task (the workload's, a fill's, the warm-up's) gets a key, k000000..k<N-1>, "+
		"round robin: the i-th task enqueued gets key i mod N, so every key holds the same share and all N stay active while a backlog lasts "+
		"(a random draw would leave some keys short, and some unused on a short run); 0: no key. Needs feature level 16")
	fs.StringVar(&c.Order, "order", "", "before the workload, set the queue's claim order: fifo (priority, then enqueue order) or fair "+
		"(priority, then round robin over keys); not given: the queue's order stays as it is (a new queue's is fifo). Needs feature level 16")
	fs.IntVar(&maxPerKey, "max-running-per-key", 0, "before the workload, set the queue's limit of RUNNING tasks per key (0 clears it); "+
		"not given: the queue's stays as it is. Needs feature level 16")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	tokenFlag := c.Token != ""
	if c.Token == "" {
		c.Token = os.Getenv(envToken)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: docket bench takes flags only, got %q", ErrUsage, fs.Args())
	}
	c.AgentArgs = strings.Fields(agentArgs)
	var errs []error
	if c.Procs != 1 && c.Procs != 3 {
		errs = append(errs, fmt.Errorf("--procs %d: want 1 or 3", c.Procs))
	}
	if c.Groups < 1 || c.Groups > 64 || (c.Groups > 1 && c.Procs != 3) {
		errs = append(errs, fmt.Errorf("--groups %d: want 1..64, and more than one needs --procs 3", c.Groups))
	}
	if c.LogStore != raftlog.LogStoreBolt && c.LogStore != raftlog.LogStoreWAL {
		errs = append(errs, fmt.Errorf("--log-store %q: want %s or %s", c.LogStore, raftlog.LogStoreBolt, raftlog.LogStoreWAL))
	}
	known := false
	for _, w := range Workloads {
		known = known || w == c.Workload
	}
	if !known {
		errs = append(errs, fmt.Errorf("--workload %q not one of %s", c.Workload, strings.Join(Workloads, ", ")))
	}
	for name, v := range map[string]int{"c": c.Concurrency, "batch": c.Batch, "claim-batch": c.ClaimBatch,
		"producers": c.Producers, "workers": c.Workers, "leases": c.Leases, "trials": c.Trials, "backlog": c.Backlog} {
		if v < 1 {
			errs = append(errs, fmt.Errorf("--%s %d must be at least 1", name, v))
		}
	}
	if c.Payload < 0 || c.Duration <= 0 || c.Count < 0 || c.Lease <= 0 || c.Retention < 0 {
		errs = append(errs, errors.New("--payload, --count, --retention must be >= 0 and --duration, --lease > 0"))
	}
	if c.SharedRPCs < -1 || c.SharedEnq < -1 {
		errs = append(errs, errors.New("--shared-rpcs, --shared-enqueue-rpcs must be >= 0, or -1 for the default"))
	}
	if c.Addr != "" && (c.Workload == "failover" || c.Workload == "backlog") {
		errs = append(errs, fmt.Errorf("--workload %s kills and restarts nodes: it needs the local cluster, not --addr", c.Workload))
	}
	if c.TLS && c.Addr != "" {
		errs = append(errs, errors.New("--tls makes the local cluster's certificates; for --addr give --tls-ca (and --tls-cert, --tls-key)"))
	}
	if tokenFlag && c.Addr == "" {
		errs = append(errs, errors.New("--token is for an --addr cluster; the local cluster mints its own with --auth"))
	}
	if c.Auth && c.Addr != "" {
		errs = append(errs, errors.New("--auth starts the local cluster with tokens; for --addr give --token"))
	}
	errs = append(errs, c.parsePairs()...)
	errs = append(errs, c.parseFair(fs, maxPerKey)...)
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	return c, nil
}

// envToken is the caller's token, as every docket verb reads it.
const envToken = "DOCKET_TOKEN"

// redactToken hides a --token value from the command the report shows.
func redactToken(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		switch {
		case a == "--token" || a == "-token":
			if i+1 < len(out) {
				out[i+1] = "REDACTED"
			}
		case strings.HasPrefix(a, "--token=") || strings.HasPrefix(a, "-token="):
			out[i] = a[:strings.Index(a, "=")+1] + "REDACTED"
		}
	}
	return out
}

// sharedRPCs is the client's RPCs in flight before calls share, by kind,
// as the report records them.
func (c Config) sharedRPCs() map[string]int {
	m := map[string]int{}
	for _, k := range client.RPCKinds() {
		n := client.DefaultSharedRPCs(k)
		if c.SharedRPCs >= 0 {
			n = c.SharedRPCs
		}
		if k == client.EnqueueRPCs && c.SharedEnq >= 0 {
			n = c.SharedEnq
		}
		m[strings.ToLower(k.String())] = n
	}
	return m
}

func (c Config) describe() map[string]any {
	m := map[string]any{"addr": c.Addr, "concurrency": c.Concurrency, "payload": c.Payload, "payload_random": c.RandomPayload, "retention": c.Retention.String(), "batch": c.Batch,
		"claim_batch": c.ClaimBatch, "submit_claims": c.SubmitClaims, "producers": c.Producers, "workers": c.Workers, "leases": c.Leases,
		"duration": c.Duration.String(), "count": c.Count, "trials": c.Trials, "backlog": c.Backlog, "during_check": c.DuringCheck, "agent_exe": c.AgentExe,
		"lease": c.Lease.String(), "shared_rpcs": c.sharedRPCs(), "agent_args": c.AgentArgs, "log_store": c.LogStore, "procs": c.Procs, "groups": c.Groups,
		"tls": c.TLS || c.TLSCA != "", "token": c.Auth || (c.Addr != "" && c.Token != "")}
	c.fairDescribe(m)
	return m
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// runner holds one run's state.
type runner struct {
	cfg    Config
	rep    *Report
	stderr io.Writer
	local  *localcluster.Cluster
	addrs  []string
	// cpuMark, when a workload sets it, is the nodes' CPU at the end of
	// its setup (the drain's fill): server_cpu_s counts from there.
	cpuMark time.Duration
	// keySeq counts the tasks given a key (--task-keys), for the round
	// robin over keys.
	keySeq atomic.Uint64
	// rode counts the tasks claimed with submits (--submit-claims).
	rode atomic.Int64
	// main is the workload's main op, the one the ceiling and --pairs
	// compare; nil for the workloads without one.
	main *Summary
}

func (r *runner) run(ctx context.Context, exe string) error {
	if r.cfg.Workload == "ceiling" {
		s, err := r.ceilingAt(ctx, exe, r.cfg.Concurrency, r.cfg.Batch)
		if err != nil {
			return err
		}
		r.rep.Ops = append(r.rep.Ops, s)
		return nil
	}
	if r.cfg.Addr != "" {
		r.addrs = strings.Split(r.cfg.Addr, ",")
	} else {
		fmt.Fprintf(r.stderr, "bench: starting a local 3-node cluster on 127.0.0.1:%d..%d\n", r.cfg.BasePort+1, r.cfg.BasePort+3)
		lc, _, err := localcluster.Start(ctx, localcluster.Options{
			Exe: cmp.Or(r.cfg.AgentExe, exe), TempName: "docket-bench-", Keep: r.cfg.Keep, BasePort: r.cfg.BasePort, Nodes: 3, Debug: true, TLS: r.cfg.TLS, Auth: r.cfg.Auth,
			ExtraArgs: append([]string{"--log-level", "warn", "--log-store", r.cfg.LogStore}, r.cfg.AgentArgs...),
		})
		if err != nil {
			return err
		}
		defer func() {
			if err := lc.Close(); err != nil {
				fmt.Fprintln(r.stderr, "bench:", err)
			}
		}()
		r.local, r.addrs = lc, lc.Addrs()
	}
	c, err := r.client(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := r.fairSetup(ctx, c); err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(r.cfg.CPUProfile)
	if err != nil {
		return err
	}
	cpu0 := r.serverCPU()
	main, err := r.workload(ctx, c)
	stopProfile()
	if err != nil {
		return err
	}
	r.main = main
	if cpu := r.serverCPU() - max(cpu0, r.cpuMark); r.local != nil && main != nil && main.Items > 0 {
		r.rep.Extra["server_cpu_s"] = cpu.Seconds()
		r.rep.Extra["server_cpu_s_per_1000"] = cpu.Seconds() * 1000 / float64(main.Items)
	}
	if r.cfg.Ceiling && main != nil {
		conc, batch := r.cfg.Concurrency, r.cfg.Batch
		if r.cfg.Workload == "cycle" {
			conc = r.cfg.Producers
		}
		s, err := r.ceilingAt(ctx, exe, conc, batch)
		if err != nil {
			return err
		}
		r.rep.Ceiling = &s
		if s.ItemRate > 0 {
			r.rep.CeilingFraction = main.ItemRate / s.ItemRate
		}
	}
	return nil
}

// serverCPU is the local cluster's nodes' user and system CPU time so
// far, summed from /proc (0 against --addr): with the items of the main
// op it gives the servers' cost per task, the load generator's excluded
// (it runs in this process). A drain's count includes its fill.
func (r *runner) serverCPU() time.Duration {
	if r.local == nil {
		return 0
	}
	var sum time.Duration
	for _, n := range r.local.Nodes {
		sum += procCPU(n.Pid())
	}
	return sum
}

func (r *runner) client(ctx context.Context) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	opts := []client.Option{client.WithLogger(slog.Default())}
	if r.cfg.SharedRPCs >= 0 {
		opts = append(opts, client.WithSharedRPCs(r.cfg.SharedRPCs))
	}
	if r.cfg.SharedEnq >= 0 {
		opts = append(opts, client.WithSharedRPCsOf(client.EnqueueRPCs, r.cfg.SharedEnq))
	}
	if r.local != nil {
		opts = append(opts, r.local.ClientOptions()...)
	} else {
		if r.cfg.TLSCA != "" || r.cfg.TLSCert != "" {
			opts = append(opts, client.WithTLS(r.cfg.TLSCA, r.cfg.TLSCert, r.cfg.TLSKey))
		}
		if r.cfg.Token != "" {
			opts = append(opts, client.WithToken(r.cfg.Token))
		}
	}
	c, err := client.New(ctx, r.addrs, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %v: %w", r.addrs, err)
	}
	return c, nil
}

// workload runs the chosen workload; it returns the summary the ceiling is
// compared with, if any.
func (r *runner) workload(ctx context.Context, c *client.Client) (*Summary, error) {
	switch r.cfg.Workload {
	case "enqueue":
		return r.enqueue(ctx, c)
	case "drain":
		return r.drain(ctx, c)
	case "cycle":
		return r.cycle(ctx, c)
	case "heartbeat":
		return r.heartbeat(ctx, c)
	case "failover":
		return nil, r.failover(ctx, c)
	case "requeue":
		return nil, r.requeue(ctx, c)
	case "backlog":
		return nil, r.backlog(ctx, c)
	}
	return nil, fmt.Errorf("%w: unknown workload %q", ErrUsage, r.cfg.Workload)
}

func printTable(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "docket bench: workload %s, %s, %d CPUs, load %s -> %s\n", rep.Workload,
		rep.Started.Format(time.RFC3339), rep.Machine.CPUs, rep.Machine.LoadStart, rep.Machine.LoadEnd)
	if rep.fair != "" {
		fmt.Fprintln(w, rep.fair)
	}
	width := 16
	for _, s := range append(slices.Clone(rep.Ops), ceilingRows(rep)...) {
		width = max(width, len(s.Op))
	}
	fmt.Fprintf(w, "%-*s %9s %6s %11s %11s %9s %9s %9s %9s %9s\n", width,
		"op", "count", "errors", "ops/s", "tasks/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms")
	row := func(s Summary) {
		fmt.Fprintf(w, "%-*s %9d %6d %11.1f %11.1f %9.3f %9.3f %9.3f %9.3f %9.3f\n", width,
			s.Op, s.Count, s.Errors, s.OpsRate, s.ItemRate, s.P50Ms, s.P90Ms, s.P99Ms, s.P999Ms, s.MaxMs)
	}
	for _, s := range rep.Ops {
		row(s)
	}
	for _, s := range rep.Ops {
		for _, c := range s.ErrorCauses {
			fmt.Fprintf(w, "  %s error: %s\n", s.Op, c)
		}
	}
	if rep.Ceiling != nil {
		row(*rep.Ceiling)
		fmt.Fprintf(w, "queue rate / raft ceiling: %.1f%%\n", 100*rep.CeilingFraction)
	}
	if len(rep.Extra) > 0 {
		b, err := json.MarshalIndent(rep.Extra, "", "  ")
		if err == nil {
			fmt.Fprintf(w, "%s\n", b)
		}
	}
}

func ceilingRows(rep *Report) []Summary {
	if rep.Ceiling == nil {
		return nil
	}
	return []Summary{*rep.Ceiling}
}

// startCPUProfile profiles this process until the returned func is called;
// an empty path does nothing.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(fmt.Errorf("cpu profile: %w", err), f.Close())
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close() // the profile is flushed by StopCPUProfile
	}, nil
}
