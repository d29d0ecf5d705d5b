package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dockethq/docket/client"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// warmup runs before each measured phase so connections, leader discovery
// and the Go runtime are warm.
const warmup = time.Second

func (r *runner) newTasks(n int, body []byte) []*pb.NewTask {
	ts := make([]*pb.NewTask, n)
	for i := range ts {
		ts[i] = &pb.NewTask{Queue: r.cfg.Queue, Payload: body, RetentionNs: int64(r.cfg.Retention)}
		if r.cfg.TaskKeys > 0 {
			ts[i].Key = r.cfg.taskKey(r.keySeq.Add(1) - 1)
		}
	}
	return ts
}

// enqueueOnce sends one Enqueue of n tasks and records it.
func (r *runner) enqueueOnce(parent context.Context, c *client.Client, rec *Recorder, n int, body []byte) error {
	ctx, cancel := context.WithTimeout(parent, opTimeout)
	defer cancel()
	t0 := time.Now()
	items, err := c.Enqueue(ctx, r.newTasks(n, body)...)
	if err == nil {
		for _, it := range items {
			if err = client.ItemError(it); err != nil {
				break
			}
		}
	}
	if err != nil {
		if rec != nil && parent.Err() == nil {
			rec.Fail(err)
		}
		return fmt.Errorf("enqueue: %w", err)
	}
	if rec != nil {
		rec.Observe(time.Since(t0), n)
	}
	return nil
}

func (r *runner) enqueue(ctx context.Context, c *client.Client) (*Summary, error) {
	body := r.cfg.body()
	r.warm(ctx, c, body)
	rec := NewRecorder("enqueue")
	elapsed := r.drive(ctx, "enqueue", r.cfg.Concurrency, rec, func(ctx context.Context, _ int) bool {
		_ = r.enqueueOnce(ctx, c, rec, r.cfg.Batch, body) // counted as an error
		return true
	})
	s := rec.Summarize(elapsed)
	r.rep.Ops = append(r.rep.Ops, s)
	return &s, nil
}

// warm enqueues for a second, unrecorded, and returns how many tasks it
// left in the queue.
func (r *runner) warm(ctx context.Context, c *client.Client, body []byte) int64 {
	ctx, cancel := context.WithTimeout(ctx, warmup)
	defer cancel()
	var wg sync.WaitGroup
	var warmed atomic.Int64
	for w := 0; w < min(r.cfg.Concurrency, 16); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if r.enqueueOnce(ctx, c, nil, 1, body) == nil { // warm-up: errors do not count
					warmed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return warmed.Load()
}

// fill enqueues n tasks in batches of 100 from 8 callers, with a progress
// line; it is setup, not measurement.
func (r *runner) fill(ctx context.Context, c *client.Client, n int) (time.Duration, error) {
	body := r.cfg.body()
	rec := NewRecorder("fill")
	var next atomic.Int64
	var firstErr atomic.Value
	stop := r.progress(ctx, "fill", rec)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				end := next.Add(100)
				k := min(100, n-int(end-100))
				if k <= 0 {
					return
				}
				if err := r.enqueueOnce(ctx, c, rec, k, body); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop()
	if err, ok := firstErr.Load().(error); ok {
		return elapsed, fmt.Errorf("fill: %w", err)
	}
	return elapsed, ctx.Err()
}

// claimOnce claims up to k tasks (waiting up to wait) and records it.
func (r *runner) claimOnce(parent context.Context, c *client.Client, rec *Recorder, k int, wait, lease time.Duration) ([]*pb.Task, error) {
	ctx, cancel := context.WithTimeout(parent, opTimeout+wait)
	defer cancel()
	t0 := time.Now()
	ts, err := c.Claim(ctx, &pb.ClaimRequest{Queue: r.cfg.Queue, WorkerId: "bench", MaxTasks: uint32(k),
		LeaseNs: int64(lease), WaitNs: int64(wait)})
	if err != nil {
		if parent.Err() == nil { // the run's end cut it short: not an error
			rec.Fail(err)
		}
		return nil, fmt.Errorf("claim: %w", err)
	}
	if len(ts) > 0 {
		rec.Observe(time.Since(t0), len(ts))
	}
	return ts, nil
}

func (r *runner) submitOnce(parent context.Context, c *client.Client, rec *Recorder, t *pb.Task) error {
	ctx, cancel := context.WithTimeout(parent, opTimeout)
	defer cancel()
	t0 := time.Now()
	_, err := c.Submit(ctx, &pb.SubmitRequest{TaskId: t.GetId(), Fence: t.GetFence(),
		Outcome: pb.Outcome_OUTCOME_COMPLETED, Result: []byte("ok")})
	if err != nil {
		if parent.Err() == nil { // the run's end cut it short: not an error
			rec.Fail(err)
		}
		return fmt.Errorf("submit: %w", err)
	}
	rec.Observe(time.Since(t0), 1)
	return nil
}

// submitAll submits ts: one Submit, or one SubmitBatch for several (the
// batched claim-and-submit a worker that claims many tasks would do). A
// batch counts as one call of len(ts) tasks; its failed items as errors.
// With next > 0 (--submit-claims) it is one SubmitBatch that also claims
// up to next tasks (SubmitAndClaim), counted in claims and returned.
func (r *runner) submitAll(parent context.Context, c *client.Client, rec, claims *Recorder, ts []*pb.Task, next int) []*pb.Task {
	if len(ts) == 1 && next == 0 {
		_ = r.submitOnce(parent, c, rec, ts[0]) // counted as an error
		return nil
	}
	reqs := make([]*pb.SubmitRequest, len(ts))
	for i, t := range ts {
		reqs[i] = &pb.SubmitRequest{TaskId: t.GetId(), Fence: t.GetFence(),
			Outcome: pb.Outcome_OUTCOME_COMPLETED, Result: []byte("ok")}
	}
	ctx, cancel := context.WithTimeout(parent, opTimeout)
	defer cancel()
	t0 := time.Now()
	var items []*pb.ItemResult
	var got []*pb.Task
	var err error
	if next > 0 {
		items, got, err = c.SubmitAndClaim(ctx, &pb.ClaimRequest{Queue: r.cfg.Queue, WorkerId: "bench",
			MaxTasks: uint32(next), LeaseNs: int64(r.cfg.Lease)}, reqs...)
	} else {
		items, err = c.SubmitBatch(ctx, reqs...)
	}
	if err != nil {
		if parent.Err() == nil { // the run's end cut it short: not an error
			rec.Fail(fmt.Errorf("submit batch: %w", err))
		}
		return nil
	}
	ok := 0
	for _, it := range items {
		if err := client.ItemError(it); err != nil {
			rec.Fail(fmt.Errorf("submit batch: %w", err))
			continue
		}
		ok++
	}
	rec.Observe(time.Since(t0), ok)
	if len(got) > 0 {
		claims.Observe(time.Since(t0), len(got))
		r.rode.Add(int64(len(got)))
	}
	return got
}

// held carries each worker's tasks from one step to the next: with
// --submit-claims a step's submits claim the next step's tasks.
type held [][]*pb.Task

// next is how many tasks a worker's submits claim for its next step: k
// with --submit-claims, else none.
func (r *runner) next(k int) int {
	if r.cfg.SubmitClaims {
		return k
	}
	return 0
}

// finish submits what the workers still hold when the run ends, so that
// no lease is left to expire in a cluster that outlives the run. It is
// not measured.
func (r *runner) finish(ctx context.Context, c *client.Client, h held) {
	scratch, none := NewRecorder("submit"), NewRecorder("claim")
	for _, ts := range h {
		if len(ts) > 0 {
			r.submitAll(ctx, c, scratch, none, ts, 0)
		}
	}
}

func (r *runner) drain(ctx context.Context, c *client.Client) (*Summary, error) {
	n := r.cfg.Count
	if n == 0 {
		n = 50_000
	}
	fillCPU := r.serverCPU()
	if _, err := r.fill(ctx, c, n); err != nil {
		return nil, err
	}
	// The drain's CPU per task is compared across backlogs, so the fill's
	// CPU is reported apart and not charged to the drained tasks.
	r.cpuMark = r.serverCPU()
	if cpu := r.cpuMark - fillCPU; r.local != nil {
		r.rep.Extra["fill_cpu_s"] = cpu.Seconds()
		r.rep.Extra["fill_cpu_s_per_1000"] = cpu.Seconds() * 1000 / float64(n)
	}
	claims, submits := NewRecorder("claim"), NewRecorder("submit")
	r.cfg.Count = 0 // the fill size bounds the drain
	// With a per-key limit a claim comes back empty while tasks are still
	// pending, whenever every key with a backlog is at its limit until a
	// submit lands; then only the count of tasks taken says the backlog
	// is drained. Without one, an empty claim does.
	perKey := r.cfg.MaxRunningPerKey != nil && *r.cfg.MaxRunningPerKey > 0
	var taken atomic.Int64
	h := make(held, r.cfg.Concurrency)
	elapsed := r.drive(ctx, "drain", r.cfg.Concurrency, submits, func(ctx context.Context, w int) bool {
		ts := h[w]
		if len(ts) == 0 {
			var err error
			if ts, err = r.claimOnce(ctx, c, claims, r.cfg.ClaimBatch, 0, r.cfg.Lease); err != nil {
				return true
			}
		}
		if len(ts) == 0 {
			return perKey && taken.Load() < int64(n)
		}
		taken.Add(int64(len(ts)))
		h[w] = r.submitAll(ctx, c, submits, claims, ts, r.next(r.cfg.ClaimBatch))
		return true
	})
	r.finish(ctx, c, h)
	r.rep.Extra["tasks_claimed_with_submits"] = r.rode.Load()
	s := submits.Summarize(elapsed)
	r.rep.Ops = append(r.rep.Ops, claims.Summarize(elapsed), s)
	return &s, nil
}

// cycle runs producers and workers at once; the measure is completed
// tasks per second. Producers pause while more than backlogCap tasks are
// enqueued and not yet completed, so the run is a steady state rather than
// a race to build a backlog.
func (r *runner) cycle(ctx context.Context, c *client.Client) (*Summary, error) {
	body := r.cfg.body()
	warmed := r.warm(ctx, c, body)
	enq, claims, submits := NewRecorder("enqueue"), NewRecorder("claim"), NewRecorder("submit")
	backlogCap := int64(max(10_000, 4*r.cfg.Workers))
	k := r.cfg.ClaimBatch
	claimers := max(1, r.cfg.Workers/k)
	// The warm-up's tasks wait in the same queue, ahead of the cycle's: the
	// backlog the producers hold under backlogCap counts them too.
	var enqueued atomic.Int64
	enqueued.Store(warmed)
	r.rep.Extra["warmup_tasks"] = warmed
	h := make(held, r.cfg.Producers+claimers)
	elapsed := r.drive(ctx, "cycle", r.cfg.Producers+claimers, submits, func(ctx context.Context, w int) bool {
		if w < r.cfg.Producers {
			_, _, done := submits.Counts()
			if enqueued.Load()-int64(done) > backlogCap {
				time.Sleep(time.Millisecond)
				return true
			}
			if r.enqueueOnce(ctx, c, enq, r.cfg.Batch, body) == nil {
				enqueued.Add(int64(r.cfg.Batch))
			}
			return true
		}
		ts := h[w]
		if len(ts) == 0 {
			var err error
			if ts, err = r.claimOnce(ctx, c, claims, k, 200*time.Millisecond, r.cfg.Lease); err != nil {
				return true
			}
		}
		if len(ts) > 0 {
			h[w] = r.submitAll(ctx, c, submits, claims, ts, r.next(k))
		}
		return true
	})
	r.finish(ctx, c, h)
	r.rep.Extra["tasks_claimed_with_submits"] = r.rode.Load()
	s := submits.Summarize(elapsed)
	s.Op = "complete"
	r.rep.Ops = append(r.rep.Ops, enq.Summarize(elapsed), claims.Summarize(elapsed), s)
	return &s, nil
}

// whyEmpty is what an empty claim during a workload's setup means: the
// fill put the tasks there, so a limit holds them back.
const whyEmpty = "a limit of the queue (max running, per key, rate) or of its tenant holds the rest back; raise it, or hold fewer"

// heartbeat holds --leases leases and extends them from -c callers, one
// item per call: the server coalesces concurrent calls into one command.
func (r *runner) heartbeat(ctx context.Context, c *client.Client) (*Summary, error) {
	if _, err := r.fill(ctx, c, r.cfg.Leases); err != nil {
		return nil, err
	}
	var held []*pb.Task
	scratch := NewRecorder("claim")
	for len(held) < r.cfg.Leases {
		ts, err := r.claimOnce(ctx, c, scratch, min(1000, r.cfg.Leases-len(held)), time.Second, 5*time.Minute)
		if err != nil {
			return nil, err
		}
		if len(ts) == 0 {
			return nil, fmt.Errorf("heartbeat: claimed %d of --leases %d, then a claim came back empty: %s", len(held), r.cfg.Leases, whyEmpty)
		}
		held = append(held, ts...)
	}
	rec := NewRecorder("heartbeat")
	var lost atomic.Int64
	// A worker owns at least one lease: one with none would end the run
	// for all (drive stops when an op says it is done).
	conc := min(r.cfg.Concurrency, len(held))
	cursor := make([]int, conc)
	elapsed := r.drive(ctx, "heartbeat", conc, rec, func(ctx context.Context, w int) bool {
		// Worker w owns held[w], held[w+conc], ...
		i := w + cursor[w]*conc
		if i >= len(held) {
			cursor[w], i = 0, w
		}
		cursor[w]++
		t := held[i]
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		t0 := time.Now()
		items, err := c.Heartbeat(cctx, &pb.HeartbeatItem{TaskId: t.GetId(), Fence: t.GetFence()})
		if err != nil {
			if ctx.Err() == nil {
				rec.Fail(err)
			}
			return true
		}
		if client.ItemError(items[0]) != nil {
			lost.Add(1)
		}
		rec.Observe(time.Since(t0), 1)
		return true
	})
	s := rec.Summarize(elapsed)
	r.rep.Ops = append(r.rep.Ops, s)
	r.rep.Extra["leases_lost"] = lost.Load()
	return &s, nil
}
