package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/raftlog"
)

// A ceiling node is one process of the multi-process ceiling (groups.go):
// `docket bench ceiling-node` hosts one server of each of N Raft groups
// over the no-op FSM, and takes its orders as JSON lines on stdin,
// answering each on stdout:
//
//	-> (start)                          <- {"addrs": [raft address per group]}
//	{"groups": [[3 servers] per group]} <- {"ready": true}  (it leads its groups)
//	{"idle": ns}                        <- {"idle": CPU ns used while idle}
//	{"run": {...}}                      <- {"result": {...}}
//	(stdin closed)                         servers shut down, the process exits
//
// Group g is bootstrapped by node g mod 3, and only that node is told to
// lead it, so leaders are spread evenly over the processes.

// nodeMsg is every message of the protocol, in both directions.
type nodeMsg struct {
	Addrs  []string        `json:"addrs,omitempty"`
	Groups [][]raft.Server `json:"groups,omitempty"`
	Ready  bool            `json:"ready,omitempty"`
	Run    *nodeRun        `json:"run,omitempty"`
	Idle   time.Duration   `json:"idle,omitempty"` // order: sit idle this long; reply: CPU used meanwhile
	Result *nodeResult     `json:"result,omitempty"`
	Err    string          `json:"err,omitempty"`
}

// nodeRun is one measured phase: conc callers per group this node leads.
type nodeRun struct {
	Conc     int           `json:"conc"`
	Duration time.Duration `json:"duration"`
	Count    int           `json:"count"` // per node; 0: duration only
	Data     []byte        `json:"data"`
	Items    int           `json:"items"` // tasks one entry stands for
}

// nodeResult is what one node measured. Samples are thinned to at most
// maxNodeSamples, evenly, so the answer stays small; counts are exact.
type nodeResult struct {
	OK, Failed, Items uint64
	Elapsed           time.Duration
	Samples           []time.Duration
	Causes            []string
}

const maxNodeSamples = 200_000

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runCeilingNode is `docket bench ceiling-node`.
func runCeilingNode(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ceiling-node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	index := fs.Int("index", 0, "this node's index, 0..2")
	dir := fs.String("dir", "", "data dir")
	groups := fs.Int("groups", 1, "Raft groups to host one server of")
	logStore := fs.String("log-store", raftlog.DefaultForNew, "bolt or wal")
	tlsDir := fs.String("tls-dir", "", "run Raft with TLS from a CA in this dir")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if *dir == "" || *groups < 1 || *index < 0 || *index > 2 {
		return fmt.Errorf("%w: ceiling-node needs --dir, --groups >= 1 and --index 0..2", ErrUsage)
	}
	id := fmt.Sprintf("c%d", *index+1)
	quiet := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var rafts []*cluster.BareRaft
	defer func() {
		for _, b := range rafts {
			_ = b.Close() // benchmark teardown
		}
	}()
	out := json.NewEncoder(stdout)
	var addrs []string
	for g := range *groups {
		cfg := cluster.DefaultConfig()
		cfg.ID = id
		cfg.DataDir = filepath.Join(*dir, id, fmt.Sprintf("g%d", g))
		cfg.RaftAddr = "127.0.0.1:0"
		cfg.Logger = quiet
		cfg.LogStore = *logStore
		if *tlsDir != "" {
			var err error
			if cfg.TLS, err = ceilingTLS(*tlsDir, id); err != nil {
				return err
			}
		}
		b, err := cluster.NewBareRaft(cfg, noopFSM{})
		if err != nil {
			return fmt.Errorf("group %d: %w", g, err)
		}
		rafts = append(rafts, b)
		addrs = append(addrs, string(b.Addr))
	}
	if err := out.Encode(nodeMsg{Addrs: addrs}); err != nil {
		return err
	}
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		var m nodeMsg
		if err := json.Unmarshal(in.Bytes(), &m); err != nil {
			return fmt.Errorf("ceiling-node: bad order: %w", err)
		}
		var reply nodeMsg
		switch {
		case m.Groups != nil:
			err := leadOwnGroups(ctx, rafts, m.Groups, *index)
			reply.Ready = err == nil
			if err != nil {
				reply.Err = err.Error()
			}
		case m.Run != nil:
			reply.Result = runLedGroups(ctx, rafts, *m.Run)
		case m.Idle > 0:
			// What N groups cost doing nothing: heartbeats and timers.
			c0 := cpuTime()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(m.Idle):
			}
			reply.Idle = cpuTime() - c0
		default:
			reply.Err = "unknown order"
		}
		if err := out.Encode(reply); err != nil {
			return err
		}
	}
	return in.Err()
}

// leadOwnGroups bootstraps the groups this node is to lead and waits until
// it leads each of them, handing over any other group it happens to lead.
func leadOwnGroups(ctx context.Context, rafts []*cluster.BareRaft, groups [][]raft.Server, index int) error {
	if len(groups) != len(rafts) {
		return fmt.Errorf("%d groups ordered, %d hosted", len(groups), len(rafts))
	}
	for g, servers := range groups {
		if g%3 == index {
			if err := rafts[g].Raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
				return fmt.Errorf("bootstrap group %d: %w", g, err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		done := true
		for g, b := range rafts {
			mine := g%3 == index
			leading := b.Raft.State() == raft.Leader
			if mine && !leading {
				done = false
			}
			if !mine && leading {
				want := groups[g][g%3]
				// A failed transfer is retried on the next pass.
				_ = b.Raft.LeadershipTransferToServer(want.ID, want.Address).Error()
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("ceiling-node: did not lead its groups within 60s")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// runLedGroups applies run.Data from run.Conc callers on each group this
// node leads, after a warmup, until run.Duration passes (or run.Count ops
// started).
func runLedGroups(ctx context.Context, rafts []*cluster.BareRaft, run nodeRun) *nodeResult {
	var led []*raft.Raft
	for _, b := range rafts {
		if b.Raft.State() == raft.Leader {
			led = append(led, b.Raft)
		}
	}
	phase := func(rec *Recorder, d time.Duration, limit int) time.Duration {
		stop, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		var started sync.Mutex
		n := 0
		take := func() bool {
			started.Lock()
			defer started.Unlock()
			n++
			return limit == 0 || n <= limit
		}
		t0 := time.Now()
		var wg sync.WaitGroup
		for _, r := range led {
			for range run.Conc {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for stop.Err() == nil && take() {
						s := time.Now()
						if err := r.Apply(run.Data, opTimeout).Error(); err != nil {
							rec.Fail(err)
							continue
						}
						rec.Observe(time.Since(s), run.Items)
					}
				}()
			}
		}
		wg.Wait()
		return time.Since(t0)
	}
	phase(NewRecorder("warmup"), warmup, 0)
	rec := NewRecorder("run")
	elapsed := phase(rec, run.Duration, run.Count)
	res := &nodeResult{Elapsed: elapsed, Causes: rec.Causes()}
	res.OK, res.Failed, res.Items = rec.Counts()
	rec.mu.Lock()
	s := rec.samples
	rec.mu.Unlock()
	if stride := (len(s) + maxNodeSamples - 1) / maxNodeSamples; stride > 1 {
		thin := make([]time.Duration, 0, maxNodeSamples)
		for i := 0; i < len(s); i += stride {
			thin = append(thin, s[i])
		}
		s = thin
	}
	res.Samples = s
	return res
}
