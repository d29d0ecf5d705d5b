package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Test_ConcurrentEnqueuesShareRPCs holds the client's only Enqueue slot,
// queues twenty callers behind it, and checks that they share one RPC
// while each gets exactly its own task; and that when one caller's task
// is invalid, the shared request is split so that only that caller fails.
func Test_ConcurrentEnqueuesShareRPCs(t *testing.T) {
	for _, c := range []struct {
		name     string
		bad      int // index of the caller with an invalid task; -1: none
		wantRPCs int
	}{
		{"all valid", -1, 2},
		{"one invalid", 7, 2 + 20}, // the first, the shared one refused, then one each
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := newFakeCluster(t, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			cl, err := NewWithOptions(ctx, fc.addrs(), WithLogger(testLogger()), WithEnqueueCoalescing(1))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()

			hold := make(chan struct{})
			var held atomic.Int32
			fc.setHooks(func(method string) error {
				if method == "Enqueue" && held.Add(1) == 1 {
					<-hold
				}
				return nil
			}, nil)
			release := sync.OnceFunc(func() { close(hold) })
			defer release()
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := cl.EnqueueOne(ctx, "q", []byte("first")); err != nil {
					t.Errorf("first enqueue: %v", err)
				}
			}()
			waitFor(t, 5*time.Second, "the first enqueue to hold the slot", func() bool { return held.Load() == 1 })

			const n = 20
			ids, errs := make([]string, n), make([]error, n)
			for i := range n {
				queue := "q"
				if i == c.bad {
					queue = "" // the fake refuses it, naming the field
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					ids[i], errs[i] = cl.EnqueueOne(ctx, queue, []byte(fmt.Sprint("task ", i)))
				}()
			}
			// The enqueuer has taken one of them and waits for the slot with it.
			waitFor(t, 5*time.Second, "every caller to queue", func() bool { return len(cl.enq.calls) == n-1 })
			release()
			wg.Wait()

			for i := range n {
				if i == c.bad {
					if !errors.Is(errs[i], ErrInvalidArgument) {
						t.Fatalf("caller %d with the bad task: %v, want ErrInvalidArgument", i, errs[i])
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
	cl, err := NewWithOptions(ctx, fc.addrs(), WithLogger(testLogger()), WithEnqueueCoalescing(0))
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
