package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// checkWatch polls the local nodes' docket_consistency_check_hashing
// gauge, so that the backlog workload can tell the claims taken while a
// consistency check hashed from the others: the check's cost on claims is
// what the round-3 target is about, and a sample that misses the check
// says nothing of it.
type checkWatch struct {
	urls    []string
	hashing atomic.Bool
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// checkPoll is how often the gauges are read: short against a paced
// check's tens of seconds.
const checkPoll = 100 * time.Millisecond

func (r *runner) watchChecks(ctx context.Context) (*checkWatch, error) {
	if r.local == nil {
		return nil, fmt.Errorf("%w: --during-check needs the local cluster (not --addr)", ErrUsage)
	}
	w := &checkWatch{}
	for _, n := range r.local.Nodes {
		if !strings.HasPrefix(n.Metrics, "http://") {
			return nil, fmt.Errorf("%w: --during-check reads plain /metrics: run it without --tls --auth", ErrUsage)
		}
		w.urls = append(w.urls, n.Metrics)
	}
	ctx, w.stop = context.WithCancel(ctx)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(checkPoll)
		defer t.Stop()
		for {
			w.hashing.Store(w.anyHashing(ctx))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w, nil
}

// anyHashing reports whether a node's gauge reads 1. A node that does not
// answer counts as not hashing: the sample is then labelled by the others.
func (w *checkWatch) anyHashing(ctx context.Context) bool {
	for _, u := range w.urls {
		if gaugeIsOne(ctx, u, "docket_consistency_check_hashing") {
			return true
		}
	}
	return false
}

func gaugeIsOne(ctx context.Context, url, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, name+" ") {
			return strings.TrimSpace(strings.TrimPrefix(line, name)) == "1"
		}
	}
	return false
}

// waitHashing waits until a node hashes, for at most d.
func (w *checkWatch) waitHashing(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for !w.hashing.Load() {
		if time.Now().After(deadline) {
			return fmt.Errorf("no consistency check started within %s (the agents' --check-interval)", d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(checkPoll):
		}
	}
	return nil
}

// Close stops the poller.
func (w *checkWatch) Close() {
	w.stop()
	w.wg.Wait()
}
