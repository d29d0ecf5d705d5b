package client

import (
	"context"
	"errors"
	"testing"
	"time"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Test_FrozenLeaderCostsAnAttemptNotTheDeadline: a leader that takes calls
// and answers none (SIGSTOP) holds a call for one attempt timeout, after
// which it goes to the new leader: well inside the caller's 5 s deadline.
func Test_FrozenLeaderCostsAnAttemptNotTheDeadline(t *testing.T) {
	fc := newFakeCluster(t, 3)
	c := mustClient(t, fc.addrs()...) // the default attempt timeout
	mustEnqueue(t, c, "q", "warm")
	if c.Leader() != fc.addr(0) {
		t.Fatalf("leader %q, want node 0", c.Leader())
	}
	fc.freeze(0, 1)

	start := time.Now()
	_, err := c.EnqueueOne(ctxTimeout(t, 5*time.Second), "q", []byte("after"))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("enqueue after the freeze: %v (after %v)", err, took)
	}
	if took > DefaultAttemptTimeout+time.Second {
		t.Fatalf("enqueue took %v: more than one attempt timeout (%v) past the freeze", took, DefaultAttemptTimeout)
	}
	if c.Leader() != fc.addr(1) {
		t.Fatalf("leader %q, want node 1", c.Leader())
	}
	t.Logf("enqueue finished %v after the leader froze", took.Round(time.Millisecond))
}

// Test_AttemptTimeoutIsOutcomeUnknown: a Nack whose attempt gets no answer
// may still have applied; it is not repeatable, so the caller gets
// ErrOutcomeUnknown after one attempt timeout, and no context error: its
// own deadline has not passed.
func Test_AttemptTimeoutIsOutcomeUnknown(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := timeoutClient(t, fc, 200*time.Millisecond)
	fc.freeze(0, 1)
	start := time.Now()
	_, err := c.Nack(ctxTimeout(t, 5*time.Second), &docketv1.NackRequest{TaskId: "t1", Fence: 1})
	if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown and not DeadlineExceeded", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("took %v", took)
	}
	if n := fc.countAll("Nack"); n != 1 {
		t.Fatalf("%d Nack attempts, want 1", n)
	}
}

// Test_LongPollAttemptGetsItsWait: the attempt timeout does not cut a
// long-poll short: its attempt has the wait on top.
func Test_LongPollAttemptGetsItsWait(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := timeoutClient(t, fc, 200*time.Millisecond)
	start := time.Now()
	tasks, err := c.Claim(ctxTimeout(t, 5*time.Second), &docketv1.ClaimRequest{Queue: "q", WorkerId: "w", MaxTasks: 1, WaitNs: int64(time.Second)})
	if err != nil || len(tasks) != 0 {
		t.Fatalf("Claim = %v, %v", tasks, err)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("long-poll returned after %v, before its wait", took)
	}
	// One long-poll attempt, not cut short and sent again.
	if n := fc.longPolls(); n != 1 {
		t.Fatalf("%d long-poll Claim attempts, want 1", n)
	}
}

// Test_LongPollOnFrozenLeaderMovesOn: a long-poll on a frozen leader ends
// after its wait plus the attempt timeout and claims from the new leader.
func Test_LongPollOnFrozenLeaderMovesOn(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := timeoutClient(t, fc, 200*time.Millisecond)
	mustEnqueue(t, c, "q", "work")
	fc.freeze(0, 1)
	start := time.Now()
	tasks, err := c.Claim(ctxTimeout(t, 10*time.Second), &docketv1.ClaimRequest{Queue: "q", WorkerId: "w", MaxTasks: 1, WaitNs: int64(500 * time.Millisecond)})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("Claim = %v, %v", tasks, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("claim took %v, want about 0.7 s", took)
	}
}

func timeoutClient(t *testing.T, fc *fakeCluster, d time.Duration) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := New(ctx, fc.addrs(), WithLogger(testLogger()),
		WithRetryBackoff(time.Millisecond, 20*time.Millisecond), WithAttemptTimeout(d))
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
