package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/internal/testwait"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Leaders that stop answering, die, or are still named by followers after
// they died: the client finds the new one without waiting out its backoff.

// A leader that stops answering (a paused process: its connections stay
// open) must not keep every later call waiting on it: the call that timed
// out forgets it, and the next call finds the new leader.
func Test_ForgetsLeaderThatLetTheDeadlinePass(t *testing.T) {
	fc := newFakeCluster(t, 3)
	c := mustClient(t, fc.addrs()...)
	if _, err := c.Stats(ctxTimeout(t, time.Second), "q", ""); err != nil {
		t.Fatalf("stats: %v", err)
	}
	if got := c.Leader(); got != fc.addr(0) {
		t.Fatalf("leader = %q, want %q", got, fc.addr(0))
	}
	release := make(chan struct{})
	defer close(release)
	fc.setHooks(func(method string) error {
		if method == "Enqueue" {
			<-release
		}
		return nil
	}, nil)
	if _, err := c.EnqueueOne(ctxTimeout(t, 200*time.Millisecond), "q", []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("enqueue to a hung leader: %v, want a deadline error", err)
	}
	if got := c.Leader(); got == fc.addr(0) {
		t.Fatalf("client still follows the leader that did not answer")
	}
	fc.setHooks(nil, nil)
	fc.setLeader(1)
	if _, err := c.EnqueueOne(ctxTimeout(t, time.Second), "q", []byte("y")); err != nil {
		t.Fatalf("enqueue after the leader moved: %v", err)
	}
	if got := c.Leader(); got != fc.addr(1) {
		t.Fatalf("leader = %q, want %q", got, fc.addr(1))
	}
}

// newClientNoSleep returns a client whose backoff between retry rounds is
// an hour: a call that sleeps even once cannot finish within a test, so a
// call that does finish shows that the client never slept.
func newClientNoSleep(t testing.TB, addrs ...string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := New(ctx, addrs, WithLogger(testLogger()), WithRetryBackoff(time.Hour, time.Hour))
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// When the leader is killed its port refuses connections. The client must
// ask the other nodes at once rather than sleep a backoff first: the new
// leader may already be elected.
func Test_DeadLeaderAsksOtherNodesBeforeBackingOff(t *testing.T) {
	fc := newFakeCluster(t, 3)
	c := newClientNoSleep(t, fc.addrs()...)
	if _, err := c.Stats(ctxTimeout(t, 5*time.Second), "q", ""); err != nil {
		t.Fatalf("stats: %v", err)
	}
	if got := c.Leader(); got != fc.addr(0) {
		t.Fatalf("leader = %q, want %q", got, fc.addr(0))
	}
	fc.stopNode(0)
	fc.setLeader(1)
	// The deadline only keeps a regression from hanging the test: a client
	// that slept its hour-long backoff fails it, however fast the machine.
	if _, err := c.Stats(ctxTimeout(t, 10*time.Second), "q", ""); err != nil {
		t.Fatalf("stats after the leader died: %v (the client slept before asking the other nodes)", err)
	}
	if got := c.Leader(); got != fc.addr(1) {
		t.Fatalf("leader = %q, want %q", got, fc.addr(1))
	}
}

// Right after the leader dies, the other nodes still name it until their
// heartbeat timeout. The client must not keep following them back to the
// dead node: it tries every node once, then backs off, and it does not
// cache the dead node as leader. Once a new leader is known, the next call
// finds it.
func Test_DeadLeaderNamedByStaleFollowersIsNotFollowed(t *testing.T) {
	fc := newFakeCluster(t, 3)
	// One seed, so that no Status call of New's discovery, cancelled once
	// the seed answered, can reach a node late and spoil the counts below.
	c := newClientNoSleep(t, fc.addr(0))
	if _, err := c.Stats(ctxTimeout(t, 5*time.Second), "q", ""); err != nil {
		t.Fatalf("stats: %v", err)
	}
	statusBefore := fc.count(1, "Status") + fc.count(2, "Status")
	fc.stopNode(0) // fc.leader stays 0: nodes 1 and 2 keep naming it

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Stats(ctx, "q", "")
		done <- err
	}()
	// One round: the dead leader, then each live node once (each answers
	// Unavailable naming the dead node), then the hour-long backoff.
	testwait.For(t, 5*time.Second, "the call to try both live nodes", func() bool {
		return fc.count(1, "Stats") == 1 && fc.count(2, "Stats") == 1
	})
	if got := c.Leader(); got == fc.addr(0) {
		t.Fatalf("client caches the dead node %s as leader because followers named it", got)
	}
	cancel()
	err := <-done
	if !errors.Is(err, ErrNoLeader) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrNoLeader and Canceled", err)
	}
	if n1, n2 := fc.count(1, "Stats"), fc.count(2, "Stats"); n1 != 1 || n2 != 1 {
		t.Fatalf("live nodes saw %d and %d Stats calls, want one each: a round tries each node once", n1, n2)
	}
	if n := fc.count(1, "Status") + fc.count(2, "Status") - statusBefore; n != 2 {
		t.Fatalf("%d Status calls to the live nodes, want 2: one discovery per round", n)
	}

	fc.setLeader(1)
	if _, err := c.Stats(ctxTimeout(t, 10*time.Second), "q", ""); err != nil {
		t.Fatalf("stats once node 1 leads: %v", err)
	}
	if got := c.Leader(); got != fc.addr(1) {
		t.Fatalf("leader = %q, want %q", got, fc.addr(1))
	}
}

// Test_StaleFenceHidesCurrentFence: against a server that still names the
// task's current fence in a stale answer (an older release), the client's
// errors and items do not pass it on.
func Test_StaleFenceHidesCurrentFence(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	leak := func(string) error {
		st, _ := status.New(codes.FailedPrecondition, "task t1: stale fence: fence 1; task is RUNNING under fence 4242").
			WithDetails(&errdetails.ErrorInfo{Reason: docketv1.ReasonStaleFence, Domain: docketv1.ErrorDomain})
		return st.Err()
	}
	fc.setHooks(leak, nil)
	_, err := c.Nack(ctxTimeout(t, time.Second), &docketv1.NackRequest{TaskId: "t1", Fence: 1})
	if !errors.Is(err, ErrStaleFence) || strings.Contains(err.Error(), "4242") {
		t.Fatalf("Nack error = %v: want ErrStaleFence without the current fence", err)
	}
	fc.setHooks(nil, nil)

	old := &docketv1.ItemResult{Code: docketv1.Code_CODE_STALE_FENCE, TaskId: "t1", Fence: 4242,
		State: docketv1.TaskState_TASK_STATE_RUNNING, Detail: "fence 1; task is RUNNING under fence 4242"}
	if err := ItemError(old); !errors.Is(err, ErrStaleFence) || strings.Contains(err.Error(), "4242") {
		t.Fatalf("ItemError = %v: want ErrStaleFence without the current fence", err)
	}
	hideStale([]*docketv1.ItemResult{old})
	if old.GetFence() != 0 || old.GetState() != docketv1.TaskState_TASK_STATE_UNSPECIFIED || old.GetDetail() != "" {
		t.Fatalf("stale item after hideStale: %v", old)
	}
}
