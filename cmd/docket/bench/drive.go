package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// opTimeout bounds every single operation of a workload.
const opTimeout = 10 * time.Second

// drive runs op from conc goroutines until --duration passes, --count ops
// have started, ctx ends, or op asks to stop (returns false). Operations in
// flight at the end finish (each is bounded by opTimeout) and count: op gets
// ctx, not the duration's. drive prints a progress line every second from
// the progress recorder and returns the measured wall time.
func (r *runner) drive(ctx context.Context, label string, conc int, progress *Recorder,
	op func(ctx context.Context, worker int) bool) time.Duration {
	stop, cancel := context.WithTimeout(ctx, r.cfg.Duration)
	defer cancel()
	var started atomic.Int64
	limit := int64(r.cfg.Count)
	stopProgress := r.progress(stop, label, progress)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for stop.Err() == nil {
				if limit > 0 && started.Add(1) > limit {
					return
				}
				if !op(ctx, w) {
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	return elapsed
}

// progress prints a live line to stderr each second until the returned
// func is called.
func (r *runner) progress(ctx context.Context, label string, rec *Recorder) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var lastItems uint64
		for {
			select {
			case <-done:
				fmt.Fprintln(r.stderr)
				return
			case <-ctx.Done():
				<-done
				fmt.Fprintln(r.stderr)
				return
			case <-t.C:
				ok, failed, items := rec.Counts()
				fmt.Fprintf(r.stderr, "\rbench %-10s %5.0fs  ops %9d  errors %5d  tasks %9d  now %8.0f tasks/s ",
					label, time.Since(start).Seconds(), ok, failed, items, float64(items-lastItems))
				lastItems = items
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// payload returns n deterministic bytes.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// body is the payload of every task of the run: payload's pattern, or
// with --payload-random the same pseudo-random bytes on every run.
func (c *Config) body() []byte {
	if !c.RandomPayload {
		return payload(c.Payload)
	}
	b := make([]byte, c.Payload)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
