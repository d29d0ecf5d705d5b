// Command natsbench is the NATS side of Docket's benchmark comparison
// (BENCHMARKS.md): it starts a local 3-node nats-server cluster on
// 127.0.0.1 with JetStream, an R3 work-queue stream on files fsync'd on
// every write (sync_interval: always), and drives it with nats.go's
// JetStream API in the shapes `docket bench` measures:
//
//   - pub:   synchronous publish from -c callers (Docket: enqueue -c N);
//   - async: -c publishers with --window publishes in flight each
//     (Docket: enqueue with --batch);
//   - fetch: fill --count messages, then -c consumers fetch --fetch at a
//     time and acknowledge each (Docket: drain --claim-batch). --ack plain
//     (default) sends each ack without waiting, as `nats bench` does;
//     --ack double waits for the server's confirmation of each, one at a
//     time, which is closer to Docket's Submit (answered after commit) but
//     pays one round trip per message, since JetStream has no batch ack.
//
// It is its own module so that the NATS client stays out of the docket
// binary and out of `make test`. The nats CLI does not install from the
// module proxy; nats-server does:
//
//	go install github.com/nats-io/nats-server/v2@v2.15.2
//	cd cmd/natsbench && go run . --workload pub -c 16 --duration 10s
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type config struct {
	workload  string
	server    string
	basePort  int
	conc      int
	payload   int
	window    int
	fetch     int
	count     int
	duration  time.Duration
	replicas  int
	ack       string
	jsonOut   bool
	keepFiles bool
}

// summary matches the fields of `docket bench --json`'s ops, so one script
// can read both.
type summary struct {
	Op       string  `json:"op"`
	Count    uint64  `json:"count"`
	Errors   uint64  `json:"errors"`
	Seconds  float64 `json:"seconds"`
	ItemRate float64 `json:"items_per_sec"`
	P50Ms    float64 `json:"p50_ms"`
	P90Ms    float64 `json:"p90_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
}

type report struct {
	Workload string         `json:"workload"`
	Started  time.Time      `json:"started"`
	Command  string         `json:"command"`
	Server   string         `json:"nats_server"`
	Ops      []summary      `json:"ops"`
	Config   map[string]any `json:"config"`
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "natsbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 2 && args[0] == "table" {
		return table(args[1], stdout)
	}
	fs := flag.NewFlagSet("natsbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.workload, "workload", "pub", "pub, async or fetch")
	fs.StringVar(&c.server, "nats-server", "nats-server", "the nats-server binary")
	fs.IntVar(&c.basePort, "base-port", 4300, "node i: client port base+i, cluster port base+100+i, on 127.0.0.1")
	fs.IntVar(&c.conc, "c", 16, "concurrent publishers or consumers")
	fs.IntVar(&c.payload, "payload", 128, "message bytes")
	fs.IntVar(&c.window, "window", 100, "async: publishes in flight per publisher")
	fs.IntVar(&c.fetch, "fetch", 100, "fetch: messages per fetch")
	fs.IntVar(&c.count, "count", 50000, "fetch: messages to fill and drain")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "pub and async: how long to run")
	fs.IntVar(&c.replicas, "replicas", 3, "stream replicas")
	fs.StringVar(&c.ack, "ack", "plain", "fetch: plain (do not wait for the server) or double (wait for each)")
	fs.BoolVar(&c.jsonOut, "json", false, "print the report as JSON")
	fs.BoolVar(&c.keepFiles, "keep", false, "keep the servers' data dir")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.ack != "plain" && c.ack != "double" {
		return fmt.Errorf("--ack %q: want plain or double", c.ack)
	}
	if c.conc < 1 || c.payload < 1 || c.window < 1 || c.fetch < 1 || c.count < 1 || c.duration <= 0 {
		return errors.New("-c, --payload, --window, --fetch, --count and --duration must be positive")
	}
	cl, err := startCluster(ctx, c, stderr)
	if err != nil {
		return err
	}
	defer cl.stop()
	nc, err := nats.Connect(strings.Join(cl.urls, ","), nats.Timeout(5*time.Second))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(max(256, c.window*c.conc)))
	if err != nil {
		return err
	}
	stream, err := createStream(ctx, js, c.replicas)
	if err != nil {
		return err
	}
	rep := report{Workload: c.workload, Started: time.Now().UTC(), Command: "natsbench " + strings.Join(args, " "),
		Server: cl.version, Config: map[string]any{"c": c.conc, "payload": c.payload, "window": c.window, "fetch": c.fetch,
			"count": c.count, "duration": c.duration.String(), "replicas": c.replicas, "ack": c.ack, "sync_interval": "always"}}
	body := make([]byte, c.payload)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	var s summary
	switch c.workload {
	case "pub":
		s = publishSync(ctx, js, c, body)
	case "async":
		s = publishAsync(ctx, js, c, body)
	case "fetch":
		if s, err = fetchAck(ctx, js, stream, c, body); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--workload %q: want pub, async or fetch", c.workload)
	}
	rep.Ops = append(rep.Ops, s)
	if c.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "natsbench: %s, %s, %s\n%-12s %9s %6s %11s %9s %9s %9s %9s\n", rep.Workload, rep.Started.Format(time.RFC3339), rep.Server,
		"op", "count", "errors", "msgs/s", "p50 ms", "p90 ms", "p99 ms", "max ms")
	fmt.Fprintf(stdout, "%-12s %9d %6d %11.1f %9.3f %9.3f %9.3f %9.3f\n", s.Op, s.Count, s.Errors, s.ItemRate, s.P50Ms, s.P90Ms, s.P99Ms, s.MaxMs)
	return nil
}

func createStream(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.Stream, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		s, err := js.CreateOrUpdateStream(actx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.>"},
			Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: replicas})
		acancel()
		if err == nil {
			return s, nil
		}
		// The meta group may not have a leader yet.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("create stream: %w (last: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// recorder keeps every latency; the runs are bounded in time and count.
type recorder struct {
	mu   sync.Mutex
	lat  []time.Duration
	n    atomic.Uint64
	errs atomic.Uint64
}

func (r *recorder) ok(d time.Duration, items int) {
	r.n.Add(uint64(items))
	if d >= 0 {
		r.mu.Lock()
		r.lat = append(r.lat, d)
		r.mu.Unlock()
	}
}

func (r *recorder) summarize(op string, elapsed time.Duration) summary {
	r.mu.Lock()
	s := slices.Clone(r.lat)
	r.mu.Unlock()
	slices.Sort(s)
	pct := func(q float64) float64 {
		if len(s) == 0 {
			return 0
		}
		i := min(len(s)-1, max(0, int(q*float64(len(s))+0.999999)-1))
		return float64(s[i]) / 1e6
	}
	out := summary{Op: op, Count: r.n.Load(), Errors: r.errs.Load(), Seconds: elapsed.Seconds(),
		P50Ms: pct(0.5), P90Ms: pct(0.9), P99Ms: pct(0.99), MaxMs: pct(1)}
	if elapsed > 0 {
		out.ItemRate = float64(out.Count) / elapsed.Seconds()
	}
	return out
}

func publishSync(ctx context.Context, js jetstream.JetStream, c config, body []byte) summary {
	var rec recorder
	stop, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range c.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subj := fmt.Sprintf("bench.%d", w)
			for stop.Err() == nil {
				t0 := time.Now()
				pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := js.Publish(pctx, subj, body)
				pcancel()
				if err != nil {
					rec.errs.Add(1)
					continue
				}
				rec.ok(time.Since(t0), 1)
			}
		}()
	}
	wg.Wait()
	return rec.summarize(fmt.Sprintf("pub c=%d", c.conc), time.Since(start))
}

// publishAsync runs -c publishers, each keeping --window publishes in
// flight and waiting for all their acks before the next window, so a
// window is the analogue of one Docket batch Enqueue. The latency is the
// window's.
func publishAsync(ctx context.Context, js jetstream.JetStream, c config, body []byte) summary {
	var rec recorder
	stop, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range c.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subj := fmt.Sprintf("bench.%d", w)
			futures := make([]jetstream.PubAckFuture, 0, c.window)
			for stop.Err() == nil {
				t0 := time.Now()
				futures = futures[:0]
				for range c.window {
					f, err := js.PublishAsync(subj, body)
					if err != nil {
						rec.errs.Add(1)
						continue
					}
					futures = append(futures, f)
				}
				acked := 0
				for _, f := range futures {
					select {
					case <-f.Ok():
						acked++
					case <-f.Err():
						rec.errs.Add(1)
					case <-time.After(10 * time.Second):
						rec.errs.Add(1)
					}
				}
				rec.ok(time.Since(t0), acked)
			}
		}()
	}
	wg.Wait()
	return rec.summarize(fmt.Sprintf("async c=%d w=%d", c.conc, c.window), time.Since(start))
}

// fetchAck fills the stream with --count messages, then drains it with -c
// consumers sharing one durable pull consumer, each fetching --fetch at a
// time and acking every message (--ack).
func fetchAck(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, c config, body []byte) (summary, error) {
	for i := 0; i < c.count; i += c.window {
		var futures []jetstream.PubAckFuture
		for j := i; j < min(c.count, i+c.window); j++ {
			f, err := js.PublishAsync("bench.fill", body)
			if err != nil {
				return summary{}, fmt.Errorf("fill: %w", err)
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return summary{}, fmt.Errorf("fill: %w", err)
			case <-time.After(30 * time.Second):
				return summary{}, errors.New("fill: no ack within 30s")
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	cons, err := stream.CreateOrUpdateConsumer(cctx, jetstream.ConsumerConfig{Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: max(1000, c.conc*c.fetch*2)})
	cancel()
	if err != nil {
		return summary{}, fmt.Errorf("consumer: %w", err)
	}
	var rec recorder
	var left atomic.Int64
	left.Store(int64(c.count))
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	var wg sync.WaitGroup
	for range c.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Load() > 0 && time.Now().Before(deadline) {
				t0 := time.Now()
				batch, err := cons.Fetch(c.fetch, jetstream.FetchMaxWait(time.Second))
				if err != nil {
					rec.errs.Add(1)
					continue
				}
				n := 0
				for m := range batch.Messages() {
					var err error
					if c.ack == "double" {
						actx, acancel := context.WithTimeout(ctx, 10*time.Second)
						err = m.DoubleAck(actx)
						acancel()
					} else {
						err = m.Ack()
					}
					if err != nil {
						rec.errs.Add(1)
						continue
					}
					n++
				}
				if n > 0 {
					left.Add(-int64(n))
					rec.ok(time.Since(t0), n)
				}
			}
		}()
	}
	wg.Wait()
	// Plain acks are only sent: flush them so the rate counts their way out.
	if err := js.Conn().FlushTimeout(10 * time.Second); err != nil {
		return summary{}, fmt.Errorf("flush acks: %w", err)
	}
	return rec.summarize(fmt.Sprintf("fetch c=%d f=%d %s", c.conc, c.fetch, c.ack), time.Since(start)), nil
}

// natsCluster is three nats-server processes on loopback.
type natsCluster struct {
	dir     string
	keep    bool
	cmds    []*exec.Cmd
	urls    []string
	version string
}

func startCluster(ctx context.Context, c config, stderr io.Writer) (*natsCluster, error) {
	dir, err := os.MkdirTemp("", "natsbench-")
	if err != nil {
		return nil, err
	}
	cl := &natsCluster{dir: dir, keep: c.keepFiles}
	if out, err := exec.CommandContext(ctx, c.server, "--version").Output(); err == nil {
		cl.version = strings.TrimSpace(string(out))
	} else {
		cl.stop()
		return nil, fmt.Errorf("%s --version: %w (go install github.com/nats-io/nats-server/v2@v2.15.2)", c.server, err)
	}
	var routes []string
	for i := 1; i <= 3; i++ {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", c.basePort+100+i))
	}
	for i := 1; i <= 3; i++ {
		conf := fmt.Sprintf(`server_name: n%d
listen: 127.0.0.1:%d
jetstream { store_dir: %q, sync_interval: always }
cluster { name: bench, listen: 127.0.0.1:%d, routes: [%s] }
`, i, c.basePort+i, filepath.Join(dir, fmt.Sprintf("n%d", i)), c.basePort+100+i, strings.Join(routes, ", "))
		path := filepath.Join(dir, fmt.Sprintf("n%d.conf", i))
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			cl.stop()
			return nil, err
		}
		log, err := os.Create(filepath.Join(dir, fmt.Sprintf("n%d.log", i)))
		if err != nil {
			cl.stop()
			return nil, err
		}
		cmd := exec.Command(c.server, "-c", path)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			cl.stop()
			return nil, fmt.Errorf("start nats-server: %w", err)
		}
		cl.cmds = append(cl.cmds, cmd)
		cl.urls = append(cl.urls, fmt.Sprintf("nats://127.0.0.1:%d", c.basePort+i))
	}
	// Wait for every client port: a process that has started may not
	// listen yet.
	deadline := time.Now().Add(20 * time.Second)
	for i := 1; i <= 3; i++ {
		addr := fmt.Sprintf("127.0.0.1:%d", c.basePort+i)
		for {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = conn.Close() // only probing
				break
			}
			if time.Now().After(deadline) {
				cl.stop()
				return nil, fmt.Errorf("nats-server %s not listening after 20s (logs in %s)", addr, dir)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	fmt.Fprintf(stderr, "natsbench: 3 nats-servers on %s, data in %s\n", strings.Join(cl.urls, ","), dir)
	return cl, nil
}

func (cl *natsCluster) stop() {
	for _, cmd := range cl.cmds {
		_ = cmd.Process.Signal(os.Interrupt) // teardown; a stuck one is killed below
	}
	for _, cmd := range cl.cmds {
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	if !cl.keep {
		_ = os.RemoveAll(cl.dir)
	}
}
