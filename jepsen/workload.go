package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/dockethq/docket/client"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// WorkloadConfig drives the clients. The workload runs inside the control
// namespace and dials only the nodes' test addresses.
type WorkloadConfig struct {
	Nodes        []string
	Out          string        // history file
	Duration     time.Duration // main phase, with faults
	Lease        time.Duration
	Producers    int
	Workers      int
	Seed         uint64
	HealedFile   string        // the controller creates it after the final heal
	HealWait     time.Duration // longest wait for HealedFile
	DrainQuiet   time.Duration // the drain ends after this long without a claimed task
	DrainTimeout time.Duration
	StallProb    float64 // a worker stops heartbeating and outlives its lease
	NackProb     float64
	// RideProb is the probability that a worker's Submit claims its next
	// task in the same call (client.SubmitAndClaim).
	RideProb     float64
	EnqueueEvery time.Duration // each producer's mean pause between enqueues
	ProcPrefix   string        // prefixes process names, so that a second workload's ops do not collide
	// Fair runs the fair-queue loop (fair.go): it needs feature level 16,
	// so a run opts in.
	Fair bool
	// Creds are the CA, client certificate and producer, worker and
	// reader tokens; the zero value is the plain mode.
	Creds Creds
}

// Queue is the queue the workload uses.
const Queue = "jepsen"

// Register is the downstream system of record: it accepts a task's write
// only under a fence at least as new as the newest it has accepted.
type Register struct {
	mu  sync.Mutex
	top map[string]uint64
}

// Write accepts (true) or refuses a write under fence.
func (r *Register) Write(task string, fence uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fence < r.top[task] {
		return false
	}
	r.top[task] = fence
	return true
}

type workload struct {
	cfg WorkloadConfig
	rec *Recorder
	cl  *client.Client // the producers', with the producer token
	wcl *client.Client // the workers', with the worker token
	// acl holds the admin token: the final statuses' keyspace hashes read
	// every tenant, and the feature workload sets a queue limit and
	// cancels running tasks.
	acl      *client.Client
	reg      *Register
	draining atomic.Bool
	lastTask atomic.Int64 // Now() of the last claimed task
	log      *slog.Logger

	knownMu sync.Mutex
	known   []string            // acknowledged task ids, read back by the readers
	xknown  map[string][]string // the feature queues' acknowledged task ids, by queue
	conns   []*grpc.ClientConn  // the readers', one per node, with the reader token
}

// classify maps a client error to a completion type and an error class.
func classify(err error) (string, string) {
	if typ, cls, ok := classifyFeature(err); ok {
		return typ, cls
	}
	switch {
	case errors.Is(err, client.ErrStaleFence):
		return Fail, ErrStale
	case errors.Is(err, client.ErrNotFound):
		return Fail, "not_found"
	case errors.Is(err, client.ErrWrongState):
		return Fail, "wrong_state"
	case errors.Is(err, client.ErrInvalidArgument), errors.Is(err, client.ErrTooLarge):
		return Fail, err.Error()
	}
	return Info, err.Error()
}

// RunWorkload runs producers and workers for cfg.Duration, waits for the
// heal, drains, and records the nodes' final statuses.
func RunWorkload(ctx context.Context, cfg WorkloadConfig, log *slog.Logger) error {
	rec, err := NewRecorder(cfg.Out)
	if err != nil {
		return err
	}
	defer rec.Close()
	cl, err := newRoleClient(ctx, cfg, RoleProducer)
	if err != nil {
		return err
	}
	defer cl.Close()
	wcl, err := newRoleClient(ctx, cfg, RoleWorker)
	if err != nil {
		return err
	}
	defer wcl.Close()
	acl, err := newRoleClient(ctx, cfg, RoleAdmin)
	if err != nil {
		return err
	}
	defer acl.Close()
	w := &workload{cfg: cfg, rec: rec, cl: cl, wcl: wcl, acl: acl, reg: &Register{top: map[string]uint64{}}, log: log,
		xknown: map[string][]string{}}
	for _, a := range cfg.Nodes {
		cc, err := cfg.Creds.Dial(a, RoleReader)
		if err != nil {
			return fmt.Errorf("workload: dial %s: %w", a, err)
		}
		defer cc.Close()
		w.conns = append(w.conns, cc)
	}
	if err := w.waitLeader(ctx, 60*time.Second); err != nil {
		return err
	}
	if cfg.Creds.Secure() && len(cfg.Creds.Tokens) > 0 {
		anon, err := cfg.Creds.Dial(cfg.Nodes[0], "")
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = checkAuthEnforced(pctx, cl, wcl, anon)
		cancel()
		anon.Close()
		if err != nil {
			return err
		}
	}
	rec.Record(Event{Proc: "workload", Type: Info, F: FPhase, Key: "run"})
	w.lastTask.Store(Now())

	mainCtx, stopMain := context.WithTimeout(ctx, cfg.Duration)
	defer stopMain()
	allCtx, stopAll := context.WithTimeout(ctx, cfg.Duration+cfg.HealWait+cfg.DrainTimeout)
	defer stopAll()
	var prod, work sync.WaitGroup
	for i := range cfg.Producers {
		prod.Add(1)
		go func() { defer prod.Done(); w.producer(mainCtx, i) }()
	}
	for i := range cfg.Workers {
		work.Add(1)
		go func() { defer work.Done(); w.worker(allCtx, i) }()
	}
	prod.Add(1)
	go func() { defer prod.Done(); w.reader(mainCtx) }()
	prod.Add(1)
	go func() { defer prod.Done(); w.bodies(mainCtx) }()
	work.Add(1)
	go func() { defer work.Done(); w.cron(allCtx) }()
	work.Add(1)
	go func() { defer work.Done(); w.features(mainCtx, allCtx) }()
	<-mainCtx.Done()
	prod.Wait()
	w.waitHealed(allCtx)
	rec.Record(Event{Proc: "workload", Type: Info, F: FPhase, Key: "drain"})
	w.lastTask.Store(Now())
	w.draining.Store(true)
	drainStart := time.Now()
	work.Wait()
	done := Event{Proc: "workload", Type: Info, F: FPhase, Key: "done"}
	if time.Since(drainStart) >= cfg.DrainTimeout {
		done.Err = "drain timed out"
	}
	rec.Record(done)
	w.final(ctx)
	w.readAll(ctx)
	w.xreadAll(ctx)
	return nil
}

// newRoleClient is a client of the workload holding role's token (in the
// secure mode): each role's calls are checked against its own token.
func newRoleClient(ctx context.Context, cfg WorkloadConfig, role string) (*client.Client, error) {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	opts, err := cfg.Creds.ClientOptions(role)
	if err != nil {
		return nil, fmt.Errorf("workload %s client: %w", role, err)
	}
	opts = append(opts, client.WithLogger(quiet),
		client.WithRetryBackoff(20*time.Millisecond, 500*time.Millisecond), client.WithDiscoveryTimeout(time.Second))
	nctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cl, err := client.New(nctx, cfg.Nodes, opts...)
	if err != nil {
		return nil, fmt.Errorf("workload %s client: %w", role, err)
	}
	return cl, nil
}

func (w *workload) waitLeader(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := w.cl.Status(c)
		cancel()
		if err == nil && st.GetLeaderId() != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("workload: no leader within %s", d)
}

func (w *workload) waitHealed(ctx context.Context) {
	end := time.Now().Add(w.cfg.HealWait)
	for time.Now().Before(end) && ctx.Err() == nil {
		if _, err := os.Stat(w.cfg.HealedFile); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.log.Warn("no heal signal; draining anyway", "file", w.cfg.HealedFile)
}

func (w *workload) producer(ctx context.Context, i int) {
	proc := fmt.Sprintf("%sp%d", w.cfg.ProcPrefix, i)
	for n := 0; n < 1_000_000 && ctx.Err() == nil; n++ {
		if n%dagEvery == dagEvery-1 {
			w.enqueueDAG(ctx, proc, n)
			time.Sleep(w.cfg.EnqueueEvery/2 + rand.N(w.cfg.EnqueueEvery))
			continue
		}
		key := fmt.Sprintf("%s-%d", proc, n)
		for attempt := 0; attempt < 4 && ctx.Err() == nil; attempt++ {
			op := w.rec.Invoke(Event{Proc: proc, F: FEnqueue, Key: key})
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			id, err := w.cl.EnqueueOne(c, Queue, []byte(key), client.TaskIdempotencyKey(key), client.TaskMaxAttempts(1000), client.TaskTenant(Tenant))
			cancel()
			if err == nil {
				w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FEnqueue, Key: key, Task: id})
				w.knownMu.Lock()
				w.known = append(w.known, id)
				w.knownMu.Unlock()
				if n%retryEvery == 0 {
					w.retryEnqueue(ctx, proc, key)
				}
				break
			}
			typ, cls := classify(err)
			w.rec.Record(Event{Proc: proc, Op: op, Type: typ, F: FEnqueue, Key: key, Err: cls})
			if typ == Fail {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(w.cfg.EnqueueEvery/2 + rand.N(w.cfg.EnqueueEvery))
	}
}

func (w *workload) worker(ctx context.Context, i int) {
	proc := fmt.Sprintf("%sw%d", w.cfg.ProcPrefix, i)
	lease := w.cfg.Lease
	drainEnd := time.Time{}
	var next *docketv1.Task // claimed with the last Submit
	for n := 0; n < 1_000_000 && ctx.Err() == nil; n++ {
		if next != nil {
			t := next
			next = w.work(ctx, proc, t.GetId(), t.GetFence())
			continue
		}
		if w.draining.Load() {
			if drainEnd.IsZero() {
				drainEnd = time.Now().Add(w.cfg.DrainTimeout)
			}
			if time.Now().After(drainEnd) || time.Duration(Now()-w.lastTask.Load()) > w.cfg.DrainQuiet {
				return
			}
		}
		op := w.rec.Invoke(Event{Proc: proc, F: FClaim, Lease: int64(lease)})
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		tasks, err := w.wcl.Claim(c, &docketv1.ClaimRequest{Queue: Queue, Tenant: Tenant, WorkerId: proc, LeaseNs: int64(lease), MaxTasks: 1, WaitNs: int64(time.Second)})
		cancel()
		if err != nil {
			typ, cls := classify(err)
			w.rec.Record(Event{Proc: proc, Op: op, Type: typ, F: FClaim, Err: cls})
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if len(tasks) == 0 {
			w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FClaim})
			continue
		}
		t := tasks[0]
		w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FClaim, Task: t.GetId(), Key: string(t.GetPayload()), Fence: t.GetFence()})
		w.lastTask.Store(Now())
		next = w.work(ctx, proc, t.GetId(), t.GetFence())
	}
}

// work holds a claimed task: heartbeats every lease/4 for a random time,
// sometimes stalls past the lease or nacks, then writes downstream and
// submits under its fence, whether or not it still holds the lease. A
// Submit may claim the worker's next task (ride), which work returns.
func (w *workload) work(ctx context.Context, proc, task string, fence uint64) *docketv1.Task {
	lease := w.cfg.Lease
	draining := w.draining.Load()
	stall := !draining && rand.Float64() < w.cfg.StallProb
	workFor := time.Duration(rand.Int64N(int64(lease) / 4))
	if rand.IntN(8) == 0 { // long work: several heartbeats, past the claim's lease
		workFor = lease/2 + time.Duration(rand.Int64N(int64(lease)*2))
	}
	if draining {
		workFor = time.Duration(rand.Int64N(int64(lease) / 4))
	}
	end := time.Now().Add(workFor)
	for time.Now().Before(end) && ctx.Err() == nil {
		time.Sleep(min(lease/4, time.Until(end)))
		if stall || time.Now().After(end) {
			continue
		}
		op := w.rec.Invoke(Event{Proc: proc, F: FHeartbeat, Task: task, Fence: fence, Lease: int64(lease)})
		c, cancel := context.WithTimeout(ctx, lease/2)
		items, err := w.wcl.Heartbeat(c, &docketv1.HeartbeatItem{TaskId: task, Tenant: Tenant, Fence: fence, LeaseNs: int64(lease)})
		cancel()
		if err == nil {
			err = client.ItemError(items[0])
		}
		if err == nil {
			w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FHeartbeat, Task: task, Fence: fence})
			continue
		}
		typ, cls := classify(err)
		w.rec.Record(Event{Proc: proc, Op: op, Type: typ, F: FHeartbeat, Task: task, Fence: fence, Err: cls})
		if typ == Fail {
			break
		}
	}
	if stall {
		// Two leases: the reaper (every 250 ms) and another worker have
		// time to take the task over, so the Submit below is usually
		// stale, the case the fence exists for.
		time.Sleep(2 * lease)
	}
	if !draining && rand.Float64() < w.cfg.NackProb {
		op := w.rec.Invoke(Event{Proc: proc, F: FNack, Task: task, Fence: fence})
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := w.wcl.Nack(c, &docketv1.NackRequest{TaskId: task, Tenant: Tenant, Fence: fence, Reason: "jepsen"})
		cancel()
		w.complete(proc, op, FNack, task, fence, err, false)
		return nil
	}
	op := w.rec.Invoke(Event{Proc: proc, F: FWrite, Task: task, Fence: fence})
	if w.reg.Write(task, fence) {
		w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: FWrite, Task: task, Fence: fence})
	} else {
		w.rec.Record(Event{Proc: proc, Op: op, Type: Fail, F: FWrite, Task: task, Fence: fence, Err: ErrStale})
	}
	req := &docketv1.SubmitRequest{TaskId: task, Tenant: Tenant, Fence: fence,
		Outcome: docketv1.Outcome_OUTCOME_COMPLETED, Result: []byte(proc)}
	if rand.Float64() < w.cfg.RideProb {
		return w.ride(ctx, proc, req)
	}
	op = w.rec.Invoke(Event{Proc: proc, F: FSubmit, Task: task, Fence: fence})
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	done, err := w.wcl.Submit(c, req)
	cancel()
	w.complete(proc, op, FSubmit, task, fence, err, done)
	return nil
}

// ride submits req and claims the worker's next task in the same call
// and Raft entry (SubmitAndClaim): two operations of the history, invoked
// together and answered together. A failed call is info for both, since
// the submit may have applied while the claim was refused.
func (w *workload) ride(ctx context.Context, proc string, req *docketv1.SubmitRequest) *docketv1.Task {
	lease := w.cfg.Lease
	sop := w.rec.Invoke(Event{Proc: proc, F: FSubmit, Task: req.GetTaskId(), Fence: req.GetFence()})
	cop := w.rec.Invoke(Event{Proc: proc, F: FClaim, Lease: int64(lease)})
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	items, tasks, err := w.wcl.SubmitAndClaim(c, &docketv1.ClaimRequest{Queue: Queue, Tenant: Tenant, WorkerId: proc,
		LeaseNs: int64(lease), MaxTasks: 1}, req)
	cancel()
	if err != nil {
		_, cls := classify(err)
		w.rec.Record(Event{Proc: proc, Op: sop, Type: Info, F: FSubmit, Task: req.GetTaskId(), Fence: req.GetFence(), Err: cls})
		w.rec.Record(Event{Proc: proc, Op: cop, Type: Info, F: FClaim, Err: cls})
		return nil
	}
	w.complete(proc, sop, FSubmit, req.GetTaskId(), req.GetFence(), client.ItemError(items[0]),
		items[0].GetCode() == docketv1.Code_CODE_ALREADY_DONE)
	if len(tasks) == 0 {
		w.rec.Record(Event{Proc: proc, Op: cop, Type: OK, F: FClaim})
		return nil
	}
	t := tasks[0]
	w.rec.Record(Event{Proc: proc, Op: cop, Type: OK, F: FClaim, Task: t.GetId(), Key: string(t.GetPayload()), Fence: t.GetFence()})
	w.lastTask.Store(Now())
	return t
}

func (w *workload) complete(proc string, op int64, f, task string, fence uint64, err error, done bool) {
	if err == nil {
		w.rec.Record(Event{Proc: proc, Op: op, Type: OK, F: f, Task: task, Fence: fence, Done: done})
		return
	}
	typ, cls := classify(err)
	w.rec.Record(Event{Proc: proc, Op: op, Type: typ, F: f, Task: task, Fence: fence, Err: cls})
}

// final polls every node until all have applied the same index, then
// records each node's keyspace hash at that index.
func (w *workload) final(ctx context.Context) {
	var last []NodeState
	for try := 0; try < 60 && ctx.Err() == nil; try++ {
		last = w.statuses(ctx, try > 0)
		if converged(last) {
			break
		}
		time.Sleep(time.Second)
	}
	w.rec.Record(Event{Proc: "workload", Type: Info, F: FFinal, Nodes: last})
}

func converged(ns []NodeState) bool {
	for _, n := range ns {
		if n.Err != "" || n.Hash == "" || n.Applied != ns[0].Applied {
			return false
		}
	}
	return len(ns) > 0
}

func (w *workload) statuses(ctx context.Context, withHash bool) []NodeState {
	out := make([]NodeState, len(w.cfg.Nodes))
	for i, addr := range w.cfg.Nodes {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := w.acl.NodeStatus(c, addr, withHash)
		cancel()
		if err != nil {
			out[i] = NodeState{ID: addr, Err: err.Error()}
			continue
		}
		out[i] = NodeState{ID: st.GetNodeId(), Applied: st.GetFsmAppliedIndex(), Hash: st.GetKeyspaceHash()}
	}
	return out
}

// TransferTo asks the cluster to move leadership to the node with id,
// with cr's admin token.
func TransferTo(ctx context.Context, nodes []string, id string, cr Creds) (string, error) {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	opts, err := cr.ClientOptions(RoleAdmin)
	if err != nil {
		return "", fmt.Errorf("transfer: %w", err)
	}
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl, err := client.New(c, nodes, append(opts, client.WithLogger(quiet))...)
	if err != nil {
		return "", fmt.Errorf("transfer: %w", err)
	}
	defer cl.Close()
	got, err := cl.TransferLeadership(c, id)
	if err != nil {
		return "", fmt.Errorf("transfer to %s: %w", id, err)
	}
	return got, nil
}

// LeaderID returns the id of the node that says it leads, with the
// highest term, asking each node in one attempt. Status needs no token;
// cr's admin token goes with it all the same, as with every harness call.
func LeaderID(ctx context.Context, nodes []string, cr Creds) (string, error) {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	opts, err := cr.ClientOptions(RoleAdmin)
	if err != nil {
		return "", fmt.Errorf("leader: %w", err)
	}
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cl, err := client.New(c, nodes, append(opts, client.WithLogger(quiet))...)
	if err != nil {
		return "", fmt.Errorf("leader: %w", err)
	}
	defer cl.Close()
	best, term := "", uint64(0)
	for _, a := range nodes {
		c, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cl.NodeStatus(c, a, false)
		cancel()
		if err == nil && st.GetState() == "Leader" && st.GetTerm() >= term {
			best, term = st.GetNodeId(), st.GetTerm()
		}
	}
	return best, nil
}

// NodeHealth asks one node for its gRPC health: SERVING only when both the
// server ("") and the Queue service say so. Health is open: no token, but
// over TLS with the client certificate in the secure mode.
func NodeHealth(ctx context.Context, addr string, cr Creds) (string, error) {
	cc, err := cr.Dial(addr, "")
	if err != nil {
		return "", fmt.Errorf("health %s: %w", addr, err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	for _, svc := range []string{"", docketv1.Queue_ServiceDesc.ServiceName} {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		res, err := hc.Check(c, &healthpb.HealthCheckRequest{Service: svc})
		cancel()
		if err != nil {
			return "", fmt.Errorf("health %s: %w", addr, err)
		}
		if res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return res.GetStatus().String(), nil
		}
	}
	return healthpb.HealthCheckResponse_SERVING.String(), nil
}
