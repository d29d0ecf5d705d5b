package client

import (
	"context"
	"encoding/hex"
	"errors"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/internal/testwait"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

func Test_New_DiscoversLeaderAndNodes(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.setLeader(1)
	c := mustClient(t, fc.addr(0))

	if got := c.Leader(); got != fc.addr(1) {
		t.Fatalf("leader = %q, want %q", got, fc.addr(1))
	}
	for _, a := range fc.addrs() {
		if !slices.Contains(c.Addrs(), a) {
			t.Fatalf("client did not learn node %s from Status: %v", a, c.Addrs())
		}
	}
	if _, err := c.Stats(ctxTimeout(t, time.Second), "q", ""); err != nil {
		t.Fatalf("stats: %v", err)
	}
	if n := fc.count(1, "Stats"); n != 1 {
		t.Fatalf("leader saw %d Stats calls, want 1", n)
	}
	if n := fc.count(0, "Stats") + fc.count(2, "Stats"); n != 0 {
		t.Fatalf("followers saw %d Stats calls, want 0: the client should go to the leader directly", n)
	}
}

func Test_New_FailsWhenNoNodeAnswers(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()

	start := time.Now()
	_, err = New(ctxTimeout(t, 200*time.Millisecond), []string{dead},
		WithLogger(testLogger()), WithRetryBackoff(time.Millisecond, 10*time.Millisecond))
	if !errors.Is(err, ErrNoLeader) {
		t.Fatalf("err = %v, want ErrNoLeader", err)
	}
	if time.Since(start) > time.Second {
		t.Fatalf("New took %v, want about the ctx deadline", time.Since(start))
	}
}

func Test_New_NeedsAnAddress(t *testing.T) {
	if _, err := New(context.Background(), nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("err = %v, want ErrInvalidArgument", err)
	}
}

func Test_FollowsLeaderChange(t *testing.T) {
	fc := newFakeCluster(t, 3)
	// One seed: New's discovery asks only it, so no cancelled Status call
	// can reach a node late and spoil the count below.
	c := mustClient(t, fc.addr(0))
	ctx := ctxTimeout(t, time.Second)
	if _, err := c.Stats(ctx, "q", ""); err != nil {
		t.Fatalf("stats: %v", err)
	}
	statusCalls := fc.countAll("Status")

	fc.setLeader(2)
	if _, err := c.Stats(ctx, "q", ""); err != nil {
		t.Fatalf("stats after leader change: %v", err)
	}
	if got := c.Leader(); got != fc.addr(2) {
		t.Fatalf("leader = %q, want %q", got, fc.addr(2))
	}
	// One answered call and one refusal with a hint on the old leader; the
	// retry went straight to the new one.
	if n := fc.count(0, "Stats"); n != 2 {
		t.Fatalf("old leader saw %d Stats calls, want 2", n)
	}
	if n := fc.count(2, "Stats"); n != 1 {
		t.Fatalf("new leader saw %d Stats calls, want 1", n)
	}
	if n := fc.countAll("Status"); n != statusCalls {
		t.Fatalf("%d Status calls, want %d: following a hint needs no rediscovery", n, statusCalls)
	}
}

func Test_FollowsLeaderHintInErrorInfo(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := mustClient(t, fc.addrs()...)
	fc.mu.Lock()
	fc.hintInErrorOnly = true
	fc.mu.Unlock()
	fc.setLeader(1)
	if _, err := c.Stats(ctxTimeout(t, time.Second), "q", ""); err != nil {
		t.Fatalf("stats: %v", err)
	}
	if c.Leader() != fc.addr(1) {
		t.Fatalf("leader = %q, want %q from the NOT_LEADER ErrorInfo", c.Leader(), fc.addr(1))
	}
	if n := fc.count(0, "Stats"); n != 1 {
		t.Fatalf("old leader saw %d Stats calls, want 1", n)
	}
}

func Test_NodeStatus(t *testing.T) {
	fc := newFakeCluster(t, 3)
	c := mustClient(t, fc.addr(0))
	for i, a := range fc.addrs() {
		st, err := c.NodeStatus(ctxTimeout(t, time.Second), a, true)
		if err != nil || st.GetNodeId() != fc.nodes[i].id {
			t.Fatalf("NodeStatus(%s) = %v, %v; want node%d's own answer", a, st, err, i)
		}
	}
	fc.stopNode(2)
	if _, err := c.NodeStatus(ctxTimeout(t, time.Second), fc.addr(2), false); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("NodeStatus of a stopped node = %v, want ErrNoLeader (unreachable)", err)
	}
}

func Test_FollowsLeaderAfterItDies(t *testing.T) {
	fc := newFakeCluster(t, 3)
	c := mustClient(t, fc.addrs()...)
	ctx := ctxTimeout(t, time.Second)
	if _, err := c.Stats(ctx, "q", ""); err != nil {
		t.Fatalf("stats: %v", err)
	}
	fc.stopNode(0)
	fc.setLeader(1)
	if _, err := c.Stats(ctx, "q", ""); err != nil {
		t.Fatalf("stats after the leader died: %v", err)
	}
	if got := c.Leader(); got != fc.addr(1) {
		t.Fatalf("leader = %q, want %q", got, fc.addr(1))
	}
}

func Test_RetriesUnavailableUntilDeadline(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.setLeader(-1)
	c := mustClient(t, fc.addrs()...)

	start := time.Now()
	_, err := c.ReadTask(ctxTimeout(t, 300*time.Millisecond), "t1")
	if !errors.Is(err, ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrNoLeader and DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed < 250*time.Millisecond || elapsed > time.Second {
		t.Fatalf("gave up after %v, want about 300ms", elapsed)
	}
	if n := fc.countAll("GetTask"); n < 3 {
		t.Fatalf("%d GetTask attempts, want several", n)
	}
}

func Test_NoRetryOnInvalidArgument(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	_, err := c.Enqueue(ctxTimeout(t, time.Second), &docketv1.NewTask{Payload: []byte("x")})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("err = %v, want ErrInvalidArgument", err)
	}
	if !strings.Contains(err.Error(), "field tasks[0].queue") {
		t.Fatalf("err = %q, want it to name the field", err)
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("status.Code = %v, want InvalidArgument", status.Code(err))
	}
	if n := fc.count(0, "Enqueue"); n != 1 {
		t.Fatalf("%d Enqueue calls, want 1", n)
	}
}

func Test_EnqueueMintsKeyOnceAcrossRetries(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	var calls atomic.Int32
	// Attempt 1 is applied but its reply is lost with the leadership;
	// attempt 2 finds no leader; attempt 3 answers with the duplicate.
	fc.setHooks(func(m string) error {
		if m == "Enqueue" && calls.Add(1) == 2 {
			return status.Error(codes.Unavailable, "no leader")
		}
		return nil
	}, func(m string) error {
		if m == "Enqueue" && calls.Load() == 1 {
			return errLeadershipLost()
		}
		return nil
	})

	nt := &docketv1.NewTask{Queue: "q", Payload: []byte("x")}
	items, err := c.Enqueue(ctxTimeout(t, time.Second), nt)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if items[0].GetCode() != docketv1.Code_CODE_OK {
		t.Fatalf("code = %v, want OK: the duplicate was our own first attempt", items[0].GetCode())
	}
	fc.mu.Lock()
	seen, ntasks := slices.Clone(fc.seenKeys), len(fc.tasks)
	fc.mu.Unlock()
	if len(seen) != 2 || seen[0] != seen[1] {
		t.Fatalf("keys seen by the leader = %q, want the same key twice", seen)
	}
	if b, err := hex.DecodeString(seen[0]); err != nil || len(b) != 16 {
		t.Fatalf("key %q is not 128-bit hex", seen[0])
	}
	if nt.GetIdempotencyKey() != seen[0] {
		t.Fatalf("caller's task key = %q, want the minted %q", nt.GetIdempotencyKey(), seen[0])
	}
	if ntasks != 1 {
		t.Fatalf("%d tasks stored, want 1", ntasks)
	}
}

func Test_EnqueueKeepsCallerKey(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	ctx := ctxTimeout(t, time.Second)
	id1, err := c.EnqueueOne(ctx, "q", []byte("x"), TaskIdempotencyKey("order-7"), TaskPriority(3))
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	items, err := c.Enqueue(ctx, &docketv1.NewTask{Queue: "q", IdempotencyKey: "order-7"})
	if err != nil {
		t.Fatalf("enqueue again: %v", err)
	}
	if items[0].GetCode() != docketv1.Code_CODE_DUPLICATE || items[0].GetTaskId() != id1 {
		t.Fatalf("second enqueue = %v, want DUPLICATE of %s", items[0], id1)
	}
}

func Test_ErrorMapping(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want error
		code codes.Code
	}{
		{"not found", status.Error(codes.NotFound, "no task"), ErrNotFound, codes.NotFound},
		{"unauthenticated", status.Error(codes.Unauthenticated, "no token"), ErrUnauthenticated, codes.Unauthenticated},
		{"permission denied", status.Error(codes.PermissionDenied, "role"), ErrPermissionDenied, codes.PermissionDenied},
		{"stale fence", errStaleFence(), ErrStaleFence, codes.FailedPrecondition},
		{"wrong state", errWrongState(), ErrWrongState, codes.FailedPrecondition},
		{"invalid", errBadField("fence", "must be set"), ErrInvalidArgument, codes.InvalidArgument},
		{"too large", status.Error(codes.ResourceExhausted, "reason too long"), ErrTooLarge, codes.ResourceExhausted},
		{"leadership lost", errLeadershipLost(), ErrOutcomeUnknown, codes.Unavailable},
	}
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc.setHooks(func(string) error { return tc.err }, nil)
			before := fc.count(0, "Nack")
			_, err := c.Nack(ctxTimeout(t, time.Second), &docketv1.NackRequest{TaskId: "t1", Fence: 1})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if status.Code(err) != tc.code {
				t.Fatalf("status.Code = %v, want %v", status.Code(err), tc.code)
			}
			if n := fc.count(0, "Nack") - before; n != 1 {
				t.Fatalf("%d attempts, want 1: %v is not retried for Nack", n, tc.want)
			}
		})
	}
	if err := mapError(context.Canceled); err != context.Canceled {
		t.Fatalf("a non-status error should pass through, got %v", err)
	}
	if err := mapError(status.Error(codes.DeadlineExceeded, "late")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DeadlineExceeded maps to %v", err)
	}
}

func Test_ItemError(t *testing.T) {
	for code, want := range map[docketv1.Code]error{
		docketv1.Code_CODE_OK:                 nil,
		docketv1.Code_CODE_DUPLICATE:          nil,
		docketv1.Code_CODE_ALREADY_DONE:       nil,
		docketv1.Code_CODE_NOT_FOUND:          ErrNotFound,
		docketv1.Code_CODE_STALE_FENCE:        ErrStaleFence,
		docketv1.Code_CODE_WRONG_STATE:        ErrWrongState,
		docketv1.Code_CODE_INVALID_ARGUMENT:   ErrInvalidArgument,
		docketv1.Code_CODE_RESOURCE_EXHAUSTED: ErrTenantLimit,
		docketv1.Code_CODE_TIMED_OUT:          ErrTimedOut,
		docketv1.Code_CODE_CANCELLED:          ErrCancelled,
	} {
		err := ItemError(&docketv1.ItemResult{Code: code, TaskId: "t1"})
		if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
			t.Fatalf("ItemError(%v) = %v, want %v", code, err, want)
		}
	}
	// Every code a server sends has a meaning here.
	for n, name := range docketv1.Code_name {
		if err := ItemError(&docketv1.ItemResult{Code: docketv1.Code(n), TaskId: "t1"}); err != nil && strings.Contains(err.Error(), "unknown item code") {
			t.Errorf("item code %s is not mapped: %v", name, err)
		}
	}
}

// Test_SubmitOnACancelledTaskSaysSo: a Submit the server answers CANCELLED
// (the task was cancelled while the claim ran) is ErrCancelled, alone and
// shared in a SubmitBatch, and not retried.
func Test_SubmitOnACancelledTaskSaysSo(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	fc.setHooks(func(m string) error {
		if m == "Submit" {
			return withInfo(codes.FailedPrecondition, docketv1.ReasonCancelled)
		}
		return nil
	}, nil)
	req := &docketv1.SubmitRequest{TaskId: "t1", Fence: 1, Outcome: docketv1.Outcome_OUTCOME_COMPLETED}
	done, err := c.Submit(ctxTimeout(t, time.Second), req)
	if !errors.Is(err, ErrCancelled) || done || status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Submit on a cancelled claim: done %v err %v, want ErrCancelled", done, err)
	}
	if n := fc.count(0, "Submit"); n != 1 {
		t.Fatalf("%d Submit attempts, want 1", n)
	}
	err = ItemError(&docketv1.ItemResult{Code: docketv1.Code_CODE_CANCELLED, TaskId: "t1", Detail: "cancelled"})
	if !errors.Is(err, ErrCancelled) || errors.Is(err, ErrStaleFence) {
		t.Fatalf("a CANCELLED item maps to %v", err)
	}
}

func Test_LeadershipLostRetriedForSubmit(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	ctx := ctxTimeout(t, time.Second)
	mustEnqueue(t, c, "q", "x")
	tasks, err := c.Claim(ctx, &docketv1.ClaimRequest{Queue: "q", MaxTasks: 1, LeaseNs: int64(time.Minute)})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v %v", tasks, err)
	}
	var lost atomic.Bool
	fc.setHooks(nil, func(m string) error {
		if m == "Submit" && lost.CompareAndSwap(false, true) {
			return errLeadershipLost()
		}
		return nil
	})
	done, err := c.Submit(ctx, &docketv1.SubmitRequest{TaskId: tasks[0].GetId(), Fence: tasks[0].GetFence(), Outcome: docketv1.Outcome_OUTCOME_COMPLETED})
	if err != nil || !done {
		t.Fatalf("submit = %v, %v; want already done after the retry", done, err)
	}
	if n := fc.count(0, "Submit"); n != 2 {
		t.Fatalf("%d Submit calls, want 2", n)
	}
}

func Test_CancelRetriedAfterLeadershipLost(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	id := mustEnqueue(t, c, "q", "x")
	var lost atomic.Bool
	fc.setHooks(nil, func(m string) error {
		if m == "Cancel" && lost.CompareAndSwap(false, true) {
			return errLeadershipLost()
		}
		return nil
	})
	if _, err := c.CancelTask(ctxTimeout(t, time.Second), id); err != nil {
		t.Fatalf("cancel: %v; the first attempt did cancel it", err)
	}
	fc.setHooks(nil, nil)
	id2 := mustEnqueue(t, c, "q", "y")
	if _, err := c.Claim(ctxTimeout(t, time.Second), &docketv1.ClaimRequest{Queue: "q", MaxTasks: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CancelTask(ctxTimeout(t, time.Second), id2); !errors.Is(err, ErrWrongState) {
		t.Fatalf("cancel of a running task = %v, want ErrWrongState", err)
	}
}

func Test_ClaimLongPoll(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))

	// A wait longer than ctx allows is shortened: no tasks, no error.
	start := time.Now()
	tasks, err := c.Claim(ctxTimeout(t, 200*time.Millisecond), &docketv1.ClaimRequest{Queue: "q", MaxTasks: 1, WaitNs: int64(MaxWait)})
	if err != nil || len(tasks) != 0 {
		t.Fatalf("empty long-poll = %v, %v; want no tasks and no error", tasks, err)
	}
	if elapsed := time.Since(start); elapsed > 500*time.Millisecond {
		t.Fatalf("long-poll took %v", elapsed)
	}

	// A task enqueued during the wait is returned at once.
	got := make(chan []*docketv1.Task, 1)
	go func() {
		tasks, _ := c.Claim(ctxTimeout(t, 2*time.Second), &docketv1.ClaimRequest{Queue: "q", MaxTasks: 2, WaitNs: int64(time.Second)})
		got <- tasks
	}()
	// Each call long-polls once (alone, it skips the shared try): the
	// second poll is this call's.
	testwait.For(t, time.Second, "claim to wait", func() bool { return fc.longPolls() == 2 })
	id := mustEnqueue(t, c, "q", "x")
	if tasks := <-got; len(tasks) != 1 || tasks[0].GetId() != id {
		t.Fatalf("claimed %v, want %s", tasks, id)
	}
}

func Test_WaitResult(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	id := mustEnqueue(t, c, "q", "x")
	tasks, err := c.Claim(ctxTimeout(t, time.Second), &docketv1.ClaimRequest{Queue: "q", MaxTasks: 1})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v %v", tasks, err)
	}
	got := make(chan *docketv1.Task, 1)
	go func() {
		task, _ := c.WaitResult(ctxTimeout(t, 2*time.Second), id)
		got <- task
	}()
	testwait.For(t, time.Second, "WaitResult to wait", func() bool { return fc.count(0, "WaitResult") == 1 })
	if _, err := c.Submit(ctxTimeout(t, time.Second), &docketv1.SubmitRequest{TaskId: id, Fence: tasks[0].GetFence(), Outcome: docketv1.Outcome_OUTCOME_COMPLETED, Result: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	if task := <-got; task.GetState() != docketv1.TaskState_TASK_STATE_COMPLETED || string(task.GetResult()) != "ok" {
		t.Fatalf("WaitResult = %v", task)
	}

	_, err = c.WaitResult(ctxTimeout(t, 100*time.Millisecond), mustEnqueue(t, c, "q", "y"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitResult of an unfinished task = %v, want DeadlineExceeded", err)
	}
}

func Test_StaleReadWithoutLeader(t *testing.T) {
	fc := newFakeCluster(t, 3)
	c := mustClient(t, fc.addrs()...)
	id := mustEnqueue(t, c, "q", "x")
	fc.setLeader(-1)
	ctx := ctxTimeout(t, time.Second)
	if task, err := c.ReadTaskStale(ctx, id); err != nil || task.GetId() != id {
		t.Fatalf("stale read without a leader = %v, %v", task, err)
	}
	if _, err := c.ReadTask(ctxTimeout(t, 100*time.Millisecond), id); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("linearizable read without a leader = %v, want ErrNoLeader", err)
	}
}

func Test_TransferLeadership(t *testing.T) {
	fc := newFakeCluster(t, 3)
	c := mustClient(t, fc.addrs()...)
	ctx := ctxTimeout(t, time.Second)
	id, err := c.TransferLeadership(ctx, "node2")
	if err != nil || id != "node2" {
		t.Fatalf("transfer = %q, %v", id, err)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if st.GetNodeId() != "node2" || c.Leader() != fc.addr(2) {
		t.Fatalf("status answered by %s, leader %s; want node2", st.GetNodeId(), c.Leader())
	}
}

func Test_Close(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := mustClient(t, fc.addr(0))
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := c.Stats(ctxTimeout(t, time.Second), "", ""); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after close = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func Test_Backoff(t *testing.T) {
	c := &Client{cfg: config{retryBase: 10 * time.Millisecond, retryMax: 80 * time.Millisecond}}
	for attempt := range 20 {
		limit := min(10*time.Millisecond<<attempt, 80*time.Millisecond)
		if d := c.backoff(attempt); d < 0 || d > limit {
			t.Fatalf("backoff(%d) = %v, want within [0, %v]", attempt, d, limit)
		}
	}
}

func mustEnqueue(t testing.TB, c *Client, queue, payload string) string {
	t.Helper()
	id, err := c.EnqueueOne(ctxTimeout(t, time.Second), queue, []byte(payload))
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return id
}
