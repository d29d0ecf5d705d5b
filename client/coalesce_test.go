package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dockethq/docket/internal/testwait"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Test_ConcurrentEnqueuesShareRPCs holds the client's only Enqueue slot,
// queues twenty callers behind it, and checks that they share one RPC
// while each gets exactly its own task; and that when one caller's task
// is invalid, or needs a feature the cluster has not enabled (a rolling
// upgrade), the shared request is split so that only that caller fails.
func Test_ConcurrentEnqueuesShareRPCs(t *testing.T) {
	for _, c := range []struct {
		name     string
		bad      int    // index of the caller with a refused task; -1: none
		badQueue string // its queue: "" is invalid, "gated" needs a disabled feature
		wantErr  error
		wantRPCs int
	}{
		{"all valid", -1, "", nil, 2},
		{"one invalid", 7, "", ErrInvalidArgument, 2 + 20}, // the first, the shared one refused, then one each
		{"one needs a disabled feature", 7, "gated", ErrFeatureDisabled, 2 + 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := newFakeCluster(t, 1)
			cl, ctx := sharingClient(t, fc)

			held, release := fc.holdFirst(t, "Enqueue")
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := cl.EnqueueOne(ctx, "q", []byte("first")); err != nil {
					t.Errorf("first enqueue: %v", err)
				}
			}()
			testwait.For(t, 5*time.Second, "the first enqueue to hold the slot", func() bool { return held() == 1 })

			const n = 20
			ids, errs := make([]string, n), make([]error, n)
			for i := range n {
				queue := "q"
				if i == c.bad {
					queue = c.badQueue // the fake refuses the whole request
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					ids[i], errs[i] = cl.EnqueueOne(ctx, queue, []byte(fmt.Sprint("task ", i)))
				}()
			}
			testwait.For(t, 5*time.Second, "every caller to queue", func() bool { return cl.enq.lane.Waiting() == n })
			release()
			wg.Wait()

			for i := range n {
				if i == c.bad {
					if !errors.Is(errs[i], c.wantErr) {
						t.Fatalf("caller %d with the refused task: %v, want %v", i, errs[i], c.wantErr)
					}
					continue
				}
				if errs[i] != nil {
					t.Fatalf("caller %d: %v", i, errs[i])
				}
				if got := string(fc.task(ids[i]).GetPayload()); got != fmt.Sprint("task ", i) {
					t.Fatalf("caller %d got task %s holding %q: another caller's", i, ids[i], got)
				}
			}
			if got := fc.count(0, "Enqueue"); got != c.wantRPCs {
				t.Fatalf("%d Enqueue RPCs, want %d", got, c.wantRPCs)
			}
		})
	}
}

// Test_EnqueueCoalescingOff sends one RPC per call.
func Test_EnqueueCoalescingOff(t *testing.T) {
	fc := newFakeCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := New(ctx, fc.addrs(), WithLogger(testLogger()), WithSharedRPCs(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cl.EnqueueOne(ctx, "q", []byte("x")); err != nil {
				t.Errorf("enqueue: %v", err)
			}
		}()
	}
	wg.Wait()
	if cl.enq != nil || fc.count(0, "Enqueue") != 20 {
		t.Fatalf("%d Enqueue RPCs for 20 calls with coalescing off, want 20", fc.count(0, "Enqueue"))
	}
}

// Test_ConcurrentSubmitsShareOneBatch: Submits queued behind a busy slot
// go as one SubmitBatch, and each caller gets its own answer.
func Test_ConcurrentSubmitsShareOneBatch(t *testing.T) {
	fc := newFakeCluster(t, 1)
	cl, ctx := sharingClient(t, fc)
	const n = 10
	for i := range n + 1 {
		mustEnqueue(t, cl, "q", fmt.Sprint(i))
	}
	tasks, err := cl.Claim(ctx, &docketv1.ClaimRequest{Queue: "q", MaxTasks: n + 1, LeaseNs: int64(time.Minute)})
	if err != nil || len(tasks) != n+1 {
		t.Fatalf("claim: %d tasks, %v", len(tasks), err)
	}
	held, release := fc.holdFirst(t, "Submit")
	submit := func(tk *docketv1.Task, fence uint64) error {
		_, err := cl.Submit(ctx, &docketv1.SubmitRequest{TaskId: tk.GetId(), Fence: fence, Outcome: docketv1.Outcome_OUTCOME_COMPLETED})
		return err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := submit(tasks[n], tasks[n].GetFence()); err != nil {
			t.Errorf("first submit: %v", err)
		}
	}()
	testwait.For(t, 5*time.Second, "the first submit to hold the slot", func() bool { return held() == 1 })
	errs := make([]error, n)
	for i := range n {
		fence := tasks[i].GetFence()
		if i == 3 {
			fence++ // this caller's lease is gone
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = submit(tasks[i], fence) }()
	}
	testwait.For(t, 5*time.Second, "every submit to queue", func() bool { return cl.sub.lane.Queued() == n-1 })
	release()
	wg.Wait()
	for i, err := range errs {
		if i == 3 {
			if !errors.Is(err, ErrStaleFence) {
				t.Fatalf("stale submit: %v, want ErrStaleFence", err)
			}
		} else if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	if s, b := fc.count(0, "Submit"), fc.count(0, "SubmitBatch"); s != 1 || b != 1 {
		t.Fatalf("%d Submit and %d SubmitBatch RPCs, want 1 and 1", s, b)
	}
}

// Test_SharedRPCDefaults: how many RPCs of a kind go out at once before
// the next caller queues to share, under the default options and under
// the per-kind ones. Enqueue defaults to one in flight, so that each
// fsync round of the cluster carries every caller that came meanwhile;
// the other kinds to two (BENCHMARKS.md).
func Test_SharedRPCDefaults(t *testing.T) {
	enqueue := func(ctx context.Context, cl *Client) error {
		_, err := cl.EnqueueOne(ctx, "q", []byte("x"))
		return err
	}
	claim := func(ctx context.Context, cl *Client) error {
		_, err := cl.Claim(ctx, &docketv1.ClaimRequest{Queue: "q", MaxTasks: 1, LeaseNs: int64(time.Minute)})
		return err
	}
	heartbeat := func(ctx context.Context, cl *Client) error {
		_, err := cl.Heartbeat(ctx, &docketv1.HeartbeatItem{TaskId: "t", Fence: 1, LeaseNs: int64(time.Minute)})
		return err
	}
	for _, c := range []struct {
		name   string
		opts   []Option
		method string
		call   func(context.Context, *Client) error
		queued func(*Client) int // calls waiting to be sent
		want   int
	}{
		{"enqueue by default", nil, "Enqueue", enqueue, func(cl *Client) int { return cl.enq.lane.Waiting() }, 1},
		{"claim by default", nil, "Claim", claim, func(cl *Client) int { return cl.clm.lane.Waiting() }, 2},
		{"heartbeat by default", nil, "Heartbeat", heartbeat, func(cl *Client) int { return cl.hb.lane.Waiting() }, 2},
		{"enqueue under WithSharedRPCs(3)", []Option{WithSharedRPCs(3)}, "Enqueue", enqueue, func(cl *Client) int { return cl.enq.lane.Waiting() }, 3},
		{"enqueue set alone after all", []Option{WithSharedRPCs(3), WithSharedRPCsOf(EnqueueRPCs, 2)}, "Enqueue", enqueue, func(cl *Client) int { return cl.enq.lane.Waiting() }, 2},
		{"claim beside a set enqueue", []Option{WithSharedRPCs(3), WithSharedRPCsOf(EnqueueRPCs, 2)}, "Claim", claim, func(cl *Client) int { return cl.clm.lane.Waiting() }, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := newFakeCluster(t, 1)
			ctx := ctxTimeout(t, 10*time.Second)
			cl, err := New(ctx, fc.addrs(), append([]Option{WithLogger(testLogger()), WithAttemptTimeout(time.Minute)}, c.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			var wg sync.WaitGroup
			defer wg.Wait()
			held, release := fc.holdAll(t, c.method)
			defer release() // before wg.Wait: the held callers then end
			// Start callers one at a time; the first that queues shows the limit.
			sent := -1
			for i := 1; i <= 6 && sent < 0; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := c.call(ctx, cl); err != nil {
						t.Errorf("caller %d: %v", i, err)
					}
				}()
				testwait.For(t, 5*time.Second, fmt.Sprintf("caller %d sent or queued", i), func() bool {
					return int(held()) >= i || c.queued(cl) > 0
				})
				if c.queued(cl) > 0 {
					sent = i - 1
				}
			}
			release()
			if sent != c.want {
				t.Fatalf("%d %s RPCs in flight before a caller queued, want %d", sent, c.method, c.want)
			}
		})
	}
}

// Test_SharedRPCsOfRefusesAnUnknownKind: New says so instead of ignoring it.
func Test_SharedRPCsOfRefusesAnUnknownKind(t *testing.T) {
	fc := newFakeCluster(t, 1)
	_, err := New(ctxTimeout(t, 5*time.Second), fc.addrs(), WithSharedRPCsOf(RPCKind(9), 1))
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("New with an unknown kind: %v, want ErrInvalidArgument", err)
	}
}

// Test_RPCKindsAreEveryKind: RPCKinds lists each kind once, every one
// named, and a kind past them is refused (above); the bench reports its
// limits by this list.
func Test_RPCKindsAreEveryKind(t *testing.T) {
	kinds := RPCKinds()
	if len(kinds) != int(numRPCKinds) {
		t.Fatalf("RPCKinds has %d kinds, want %d", len(kinds), numRPCKinds)
	}
	for i, k := range kinds {
		if int(k) != i || strings.HasPrefix(k.String(), "RPCKind(") {
			t.Fatalf("kind %d is %v", i, k)
		}
	}
}

// Test_FullEnqueueGoesBesideTheHeldOne: while the one Enqueue RPC in
// flight is held, callers of 1 MiB payloads fill a shared RPC (4 MiB),
// and that full one goes at once beside it; the next waits.
func Test_FullEnqueueGoesBesideTheHeldOne(t *testing.T) {
	fc := newFakeCluster(t, 1)
	ctx := ctxTimeout(t, 10*time.Second)
	cl, err := New(ctx, fc.addrs(), WithLogger(testLogger()), WithAttemptTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	held, release := fc.holdAll(t, "Enqueue")
	defer release() // before wg.Wait: the held callers then end
	enqueue := func(payload []byte) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cl.EnqueueOne(ctx, "q", payload); err != nil {
				t.Errorf("enqueue: %v", err)
			}
		}()
	}
	enqueue([]byte("small"))
	testwait.For(t, 5*time.Second, "the first enqueue to be sent", func() bool { return held() == 1 })
	big := make([]byte, 1<<20)
	for range 3 { // 3 MiB and more: a fourth would pass 4 MiB
		enqueue(big)
	}
	testwait.For(t, 5*time.Second, "three callers to wait", func() bool { return cl.enq.lane.Waiting() == 3 })
	if n := held(); n != 1 {
		t.Fatalf("%d Enqueue RPCs in flight before a shared one was full, want 1", n)
	}
	enqueue(big) // does not fit: the three go, full, beside the held one
	testwait.For(t, 5*time.Second, "the full RPC to go", func() bool { return held() == 2 })
	for range 3 {
		enqueue(big)
	}
	testwait.For(t, 5*time.Second, "the next four callers to wait", func() bool { return cl.enq.lane.Waiting() == 4 })
	if n := held(); n != 2 {
		t.Fatalf("%d Enqueue RPCs in flight, want 2: one more than the limit, and only while a full one waits", n)
	}
	release()
}
