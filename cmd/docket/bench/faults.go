package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cmd/docket/localcluster"
)

// leaderNode asks the cluster for its leader and finds its process.
func (r *runner) leaderNode(ctx context.Context, c *client.Client) (*localcluster.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("find leader: %w", err)
	}
	n := r.local.ByAddr(st.GetLeaderGrpcAddr())
	if n == nil {
		return nil, fmt.Errorf("leader %s at %q is not a local node", st.GetLeaderId(), st.GetLeaderGrpcAddr())
	}
	return n, nil
}

// waitCaughtUp waits until n answers Status with an FSM applied index at
// least target, bounded by d. It returns how long that took.
func (r *runner) waitCaughtUp(ctx context.Context, c *client.Client, n *localcluster.Node, target uint64, d time.Duration) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		st, err := c.NodeStatus(sctx, n.GRPC, false)
		scancel()
		if err == nil && st.GetLeaderId() != "" && st.GetFsmAppliedIndex() >= target {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("%s not caught up to %d within %v (last: %v)", n.ID, target, d, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// watchElection polls the nodes other than victim for Status every 5 ms
// and sends the first time one of them answered as leader, or the zero
// time if ctx ends first. It splits a failover into Raft's share
// (detection and election) and the client's (finding the new leader and
// getting a write committed); the time it sends is late by up to one poll.
// The polls go over the bench client's connections but never touch its
// leader cache.
func (r *runner) watchElection(ctx context.Context, c *client.Client, victim *localcluster.Node) <-chan time.Time {
	out := make(chan time.Time, 1)
	var once sync.Once
	send := func(t time.Time) { once.Do(func() { out <- t }) }
	var wg sync.WaitGroup
	for _, n := range r.local.Nodes {
		if n == victim {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				sctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
				st, err := c.NodeStatus(sctx, n.GRPC, false)
				cancel()
				if err == nil && st.GetState() == "Leader" {
					send(time.Now())
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		send(time.Time{})
	}()
	return out
}

// failover keeps -c writers enqueueing, kills the leader with SIGKILL,
// and measures the time from the kill to the first acknowledged Enqueue
// that was sent after it, and, with watchElection, the time until a
// survivor answered Status as leader. The killed node is restarted and
// caught up before the next trial.
func (r *runner) failover(ctx context.Context, c *client.Client) error {
	body := r.cfg.body()
	r.warm(ctx, c, body)
	rec := NewRecorder("enqueue")
	var killedAt atomic.Int64 // unix ns of the current trial's kill; 0 between trials
	var firstOK atomic.Int64  // unix ns of the first ack of a write sent after the kill
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := 0; w < r.cfg.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				sent := time.Now().UnixNano()
				if r.enqueueOnce(wctx, c, rec, 1, body) != nil {
					continue
				}
				if k := killedAt.Load(); k != 0 && sent > k {
					firstOK.CompareAndSwap(0, time.Now().UnixNano())
				}
			}
		}()
	}
	defer func() { stopWriters(); wg.Wait() }()
	var times []time.Duration
	var electedMs []float64
	for trial := 1; trial <= r.cfg.Trials && ctx.Err() == nil; trial++ {
		time.Sleep(2 * time.Second) // steady load before the kill
		victim, err := r.leaderNode(ctx, c)
		if err != nil {
			return err
		}
		firstOK.Store(0)
		watchCtx, stopWatch := context.WithCancel(ctx)
		elected := r.watchElection(watchCtx, c, victim)
		kill := time.Now()
		killedAt.Store(kill.UnixNano())
		if err := victim.Kill(); err != nil {
			stopWatch()
			return err
		}
		deadline := time.Now().Add(30 * time.Second)
		for firstOK.Load() == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		killedAt.Store(0)
		ok := firstOK.Load()
		if ok == 0 {
			stopWatch()
			return fmt.Errorf("failover trial %d: no write succeeded within 30s of killing %s", trial, victim.ID)
		}
		// A write that beat the next poll still proves a leader: give the
		// watcher a moment to see it, and count the election as no later
		// than that write.
		var electedAt time.Time
		select {
		case electedAt = <-elected:
		case <-time.After(time.Second):
		}
		stopWatch()
		d := time.Duration(ok - kill.UnixNano())
		times = append(times, d)
		if electedAt.IsZero() {
			fmt.Fprintf(r.stderr, "bench failover: trial %d killed leader %s; first write after %v (no survivor seen as leader)\n",
				trial, victim.ID, d.Round(time.Millisecond))
		} else {
			e := min(electedAt.Sub(kill), d)
			electedMs = append(electedMs, float64(e.Microseconds())/1e3)
			fmt.Fprintf(r.stderr, "bench failover: trial %d killed leader %s; new leader seen after %v, first write after %v\n",
				trial, victim.ID, e.Round(time.Millisecond), d.Round(time.Millisecond))
		}
		if err := victim.Start(); err != nil {
			return err
		}
		st, err := c.Status(ctx)
		if err != nil {
			return fmt.Errorf("failover trial %d: status: %w", trial, err)
		}
		if _, err := r.waitCaughtUp(ctx, c, victim, st.GetCommitIndex(), 60*time.Second); err != nil {
			return fmt.Errorf("failover trial %d: %w", trial, err)
		}
	}
	rep := NewRecorder("failover")
	for _, d := range times {
		rep.Observe(d, 1)
	}
	s := rep.Summarize(0)
	r.rep.Ops = append(r.rep.Ops, s)
	ms := make([]float64, len(times))
	for i, d := range times {
		ms[i] = float64(d.Microseconds()) / 1e3
	}
	r.rep.Extra["failover_ms"] = ms
	r.rep.Extra["failover_worst_ms"] = slices.Max(ms)
	if len(electedMs) == len(ms) {
		// What the client adds on top of Raft: from the first Status that
		// showed the new leader to the first acknowledged write.
		after := make([]float64, len(ms))
		for i := range ms {
			after[i] = ms[i] - electedMs[i]
		}
		r.rep.Extra["failover_elected_ms"] = electedMs
		r.rep.Extra["failover_write_after_elected_ms"] = after
	}
	stopWriters()
	wg.Wait()
	r.rep.Ops = append(r.rep.Ops, rec.Summarize(time.Since(time.Unix(0, r.rep.Started.UnixNano()))))
	return nil
}

// requeueDefault is how many tasks --workload requeue claims and lets
// expire when --count is 0.
const requeueDefault = 100

// requeue models a worker that dies holding a lease: it claims --count
// tasks (default 100) under --lease, never heartbeats, and measures from
// each claim's answer to the moment the same task is claimed again. A new
// leader waits ReapGrace (10 s) before its first reap, so on a fresh
// cluster the claim is held back until that grace has passed.
func (r *runner) requeue(ctx context.Context, c *client.Client) error {
	n := cmp.Or(r.cfg.Count, requeueDefault)
	if r.local != nil {
		if wait := 11*time.Second - time.Since(r.local.Ready); wait > 0 {
			fmt.Fprintf(r.stderr, "bench requeue: waiting %v for the new leader's reap grace\n", wait.Round(time.Second))
			time.Sleep(wait)
		}
	}
	if _, err := r.fill(ctx, c, n); err != nil {
		return err
	}
	scratch := NewRecorder("claim")
	claimed := map[string]time.Time{}
	for len(claimed) < n {
		ts, err := r.claimOnce(ctx, c, scratch, n-len(claimed), time.Second, r.cfg.Lease)
		if err != nil {
			return err
		}
		if len(ts) == 0 {
			return fmt.Errorf("requeue: claimed %d of %d tasks, then a claim came back empty: %s", len(claimed), n, whyEmpty)
		}
		for _, t := range ts {
			claimed[t.GetId()] = time.Now()
		}
	}
	rec := NewRecorder("requeue")
	deadline := time.Now().Add(r.cfg.Lease + 60*time.Second)
	for len(claimed) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		ts, err := r.claimOnce(ctx, c, scratch, len(claimed), time.Second, r.cfg.Lease)
		if err != nil {
			continue
		}
		for _, t := range ts {
			if at, ok := claimed[t.GetId()]; ok {
				rec.Observe(time.Since(at), 1)
				delete(claimed, t.GetId())
			}
		}
	}
	s := rec.Summarize(0)
	r.rep.Ops = append(r.rep.Ops, s)
	r.rep.Extra["lease_ms"] = r.cfg.Lease.Milliseconds()
	r.rep.Extra["requeue_worst_over_lease_ms"] = s.MaxMs - float64(r.cfg.Lease.Milliseconds())
	r.rep.Extra["never_requeued"] = len(claimed)
	return nil
}

// claimLatency claims and submits one task at a time, -count times
// (default 2000), and records the claims.
func (r *runner) claimLatency(ctx context.Context, c *client.Client, name string, n int) (Summary, error) {
	s, _, err := r.claimLatencyDuring(ctx, c, name, n, nil)
	return s, err
}

// claimLatencyDuring is claimLatency that also summarises, apart, the
// claims that started while during() was true.
func (r *runner) claimLatencyDuring(ctx context.Context, c *client.Client, name string, n int, during func() bool) (all, while Summary, err error) {
	rec, submits := NewRecorder(name), NewRecorder("submit")
	whileRec := NewRecorder(name + ", check hashing")
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		hashing := during != nil && during()
		t0 := time.Now()
		ts, err := r.claimOnce(ctx, c, rec, 1, 0, r.cfg.Lease)
		if err != nil {
			return Summary{}, Summary{}, err
		}
		if hashing {
			whileRec.Observe(time.Since(t0), len(ts))
		}
		if len(ts) == 0 {
			return Summary{}, Summary{}, fmt.Errorf("%s: queue ran dry after %d claims", name, i)
		}
		if err := r.submitOnce(ctx, c, submits, ts[0]); err != nil {
			return Summary{}, Summary{}, err
		}
	}
	took := time.Since(start)
	return rec.Summarize(took), whileRec.Summarize(took), nil
}

// backlog compares claim latency on a near-empty queue with the same at
// --backlog pending tasks, reads every node's RSS at that backlog, and
// times a restart (SIGKILL, start) of a follower until it serves again:
// it answers Status, knows the leader, and has applied the commit index
// of the moment it was killed.
func (r *runner) backlog(ctx context.Context, c *client.Client) error {
	n := r.cfg.Count
	if n == 0 {
		n = 2000
	}
	if _, err := r.fill(ctx, c, n); err != nil {
		return err
	}
	empty, err := r.claimLatency(ctx, c, "claim (empty)", n)
	if err != nil {
		return err
	}
	fillTime, err := r.fill(ctx, c, r.cfg.Backlog+n)
	if err != nil {
		return err
	}
	r.rep.Extra["fill_seconds"] = fillTime.Seconds()
	r.rep.Extra["fill_tasks_per_sec"] = Rate(uint64(r.cfg.Backlog+n), fillTime)
	var during func() bool
	if r.cfg.DuringCheck {
		w, err := r.watchChecks(ctx)
		if err != nil {
			return err
		}
		defer w.Close()
		if err := w.waitHashing(ctx, 5*time.Minute); err != nil {
			return fmt.Errorf("backlog --during-check: %w", err)
		}
		during = w.hashing.Load
	}
	full, while, err := r.claimLatencyDuring(ctx, c, "claim (backlog)", n, during)
	if err != nil {
		return err
	}
	r.rep.Ops = append(r.rep.Ops, empty, full)
	if empty.P99Ms > 0 {
		r.rep.Extra["claim_p99_ratio"] = full.P99Ms / empty.P99Ms
	}
	if r.cfg.DuringCheck {
		r.rep.Ops = append(r.rep.Ops, while)
		r.rep.Extra["claims_while_hashing"] = while.Count
		if empty.P99Ms > 0 && while.Count > 0 {
			r.rep.Extra["claim_p99_ratio_while_hashing"] = while.P99Ms / empty.P99Ms
		}
	}
	rss := map[string]float64{}
	for _, ln := range r.local.Nodes {
		b, err := ln.RSSBytes()
		if err != nil {
			return err
		}
		rss[ln.ID] = float64(b) / (1 << 20)
	}
	r.rep.Extra["rss_mib"] = rss
	leader, err := r.leaderNode(ctx, c)
	if err != nil {
		return err
	}
	victim := r.local.Nodes[0]
	if victim == leader {
		victim = r.local.Nodes[1]
	}
	st, err := c.Status(ctx)
	if err != nil {
		return fmt.Errorf("backlog: status: %w", err)
	}
	if err := victim.Kill(); err != nil {
		return err
	}
	start := time.Now()
	if err := victim.Start(); err != nil {
		return err
	}
	if _, err := r.waitCaughtUp(ctx, c, victim, st.GetCommitIndex(), 120*time.Second); err != nil {
		return fmt.Errorf("backlog restart: %w", err)
	}
	r.rep.Extra["restart_serving_seconds"] = time.Since(start).Seconds()
	r.rep.Extra["restart_node"] = victim.ID
	b, err := victim.RSSBytes()
	if err == nil {
		r.rep.Extra["restarted_rss_mib"] = float64(b) / (1 << 20)
	}
	return nil
}
