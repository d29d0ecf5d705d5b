package client

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// fakeQueue is the fake cluster's Queue service: the one in-memory queue
// that the leader node serves, with the real service's fences and errors.
type fakeQueue struct {
	docketv1.UnimplementedQueueServer
	fc *fakeCluster
}

func tenantOf(t string) string {
	if t == "" {
		return "default"
	}
	return t
}

func terminal(s docketv1.TaskState) bool {
	return s >= docketv1.TaskState_TASK_STATE_COMPLETED
}

func (q *fakeQueue) Enqueue(_ context.Context, req *docketv1.EnqueueRequest) (*docketv1.EnqueueResponse, error) {
	fc := q.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for i, nt := range req.GetTasks() {
		if nt.GetQueue() == "" {
			return nil, errBadField(fmt.Sprintf("tasks[%d].queue", i), "must not be empty")
		}
		if nt.GetQueue() == "gated" {
			return nil, errFeatureDisabled()
		}
	}
	resp := &docketv1.EnqueueResponse{}
	for _, nt := range req.GetTasks() {
		fc.seenKeys = append(fc.seenKeys, nt.GetIdempotencyKey())
		if id, ok := fc.keys[nt.GetIdempotencyKey()]; ok && nt.GetIdempotencyKey() != "" {
			resp.Items = append(resp.Items, &docketv1.ItemResult{Code: docketv1.Code_CODE_DUPLICATE, TaskId: id, State: fc.tasks[id].GetState()})
			continue
		}
		fc.nextID++
		id := fmt.Sprintf("t%d", fc.nextID)
		fc.tasks[id] = &docketv1.Task{
			Id: id, Queue: nt.GetQueue(), Tenant: tenantOf(nt.GetTenant()), Payload: nt.GetPayload(),
			State: docketv1.TaskState_TASK_STATE_PENDING, IdempotencyKey: nt.GetIdempotencyKey(), MaxAttempts: 5,
		}
		fc.keys[nt.GetIdempotencyKey()] = id
		fc.pending = append(fc.pending, id)
		resp.Items = append(resp.Items, &docketv1.ItemResult{TaskId: id, State: docketv1.TaskState_TASK_STATE_PENDING})
	}
	fc.notifyLocked()
	return resp, nil
}

// waitChange long-polls: it runs try under the lock until it reports done,
// the wait runs out, or ctx ends.
func (fc *fakeCluster) waitChange(ctx context.Context, wait time.Duration, try func() bool) error {
	deadline := time.Now().Add(wait)
	for {
		fc.mu.Lock()
		done := try()
		ch := fc.changed
		fc.mu.Unlock()
		if done || !time.Now().Before(deadline) {
			return nil
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

func (q *fakeQueue) Claim(ctx context.Context, req *docketv1.ClaimRequest) (*docketv1.ClaimResponse, error) {
	fc := q.fc
	fc.mu.Lock()
	fc.claimMax = append(fc.claimMax, req.GetMaxTasks())
	fc.claimWaits = append(fc.claimWaits, req.GetWaitNs())
	denied := fc.deniedTenant != "" && req.GetTenant() == fc.deniedTenant
	fc.mu.Unlock()
	if denied {
		return nil, status.Error(codes.PermissionDenied, "the token does not grant tenant "+req.GetTenant())
	}
	resp := &docketv1.ClaimResponse{}
	err := fc.waitChange(ctx, time.Duration(req.GetWaitNs()), func() bool {
		resp.Tasks = fc.claimLocked(req)
		return len(resp.Tasks) > 0
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// claimLocked claims up to req's max_tasks pending tasks of its queue.
func (fc *fakeCluster) claimLocked(req *docketv1.ClaimRequest) []*docketv1.Task {
	var out []*docketv1.Task
	var fence uint64
	for _, id := range slices.Clone(fc.pending) {
		if uint32(len(out)) >= max(req.GetMaxTasks(), 1) {
			break
		}
		t := fc.tasks[id]
		if t.GetQueue() != req.GetQueue() || t.GetTenant() != tenantOf(req.GetTenant()) {
			continue
		}
		if fence == 0 {
			fc.fence++
			fence = fc.fence
		}
		fc.pending = slices.DeleteFunc(fc.pending, func(p string) bool { return p == id })
		t.State, t.Fence, t.WorkerId, t.LeaseNs = docketv1.TaskState_TASK_STATE_RUNNING, fence, req.GetWorkerId(), req.GetLeaseNs()
		t.Claims++
		out = append(out, proto.Clone(t).(*docketv1.Task))
	}
	return out
}

func (q *fakeQueue) Heartbeat(_ context.Context, req *docketv1.HeartbeatRequest) (*docketv1.HeartbeatResponse, error) {
	fc := q.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var seen []*docketv1.HeartbeatItem
	resp := &docketv1.HeartbeatResponse{}
	for _, it := range req.GetItems() {
		seen = append(seen, proto.Clone(it).(*docketv1.HeartbeatItem))
		t, ok := fc.tasks[it.GetTaskId()]
		switch {
		case !ok:
			resp.Items = append(resp.Items, &docketv1.ItemResult{Code: docketv1.Code_CODE_NOT_FOUND, TaskId: it.GetTaskId()})
		case fc.staleHB[t.GetId()] || t.GetState() != docketv1.TaskState_TASK_STATE_RUNNING || t.GetFence() != it.GetFence():
			resp.Items = append(resp.Items, &docketv1.ItemResult{Code: docketv1.Code_CODE_STALE_FENCE, TaskId: t.GetId(), State: t.GetState()})
		default:
			if it.GetHasProgress() {
				t.Progress = it.GetProgress()
			}
			resp.Items = append(resp.Items, &docketv1.ItemResult{TaskId: t.GetId(), State: t.GetState(), Fence: t.GetFence()})
		}
	}
	fc.heartbeats = append(fc.heartbeats, seen)
	return resp, nil
}

func (q *fakeQueue) Submit(_ context.Context, req *docketv1.SubmitRequest) (*docketv1.SubmitResponse, error) {
	q.fc.mu.Lock()
	defer q.fc.mu.Unlock()
	return q.submitLocked(req)
}

// SubmitBatch answers each item as Submit would, as an item code.
func (q *fakeQueue) SubmitBatch(_ context.Context, req *docketv1.SubmitBatchRequest) (*docketv1.SubmitBatchResponse, error) {
	q.fc.mu.Lock()
	defer q.fc.mu.Unlock()
	resp := &docketv1.SubmitBatchResponse{}
	for _, it := range req.GetItems() {
		r, err := q.submitLocked(it)
		code := docketv1.Code_CODE_OK
		switch {
		case status.Code(err) == codes.NotFound:
			code = docketv1.Code_CODE_NOT_FOUND
		case err != nil:
			code = docketv1.Code_CODE_STALE_FENCE
		case r.GetAlreadyDone():
			code = docketv1.Code_CODE_ALREADY_DONE
		}
		resp.Items = append(resp.Items, &docketv1.ItemResult{Code: code, TaskId: it.GetTaskId()})
	}
	return resp, nil
}

func (q *fakeQueue) submitLocked(req *docketv1.SubmitRequest) (*docketv1.SubmitResponse, error) {
	fc := q.fc
	fc.submits = append(fc.submits, proto.Clone(req).(*docketv1.SubmitRequest))
	t, ok := fc.tasks[req.GetTaskId()]
	switch {
	case !ok:
		return nil, status.Error(codes.NotFound, "no task "+req.GetTaskId())
	case t.GetState() == docketv1.TaskState_TASK_STATE_RUNNING && t.GetFence() == req.GetFence():
		t.State = docketv1.TaskState_TASK_STATE_COMPLETED
		if req.GetOutcome() == docketv1.Outcome_OUTCOME_FAILED {
			t.State = docketv1.TaskState_TASK_STATE_FAILED
		}
		t.Outcome, t.Result = req.GetOutcome(), req.GetResult()
		if req.GetError() != "" {
			t.LastError = req.GetError()
		}
		fc.notifyLocked()
		return &docketv1.SubmitResponse{}, nil
	case terminal(t.GetState()) && t.GetFence() == req.GetFence() && t.GetOutcome() == req.GetOutcome():
		return &docketv1.SubmitResponse{AlreadyDone: true}, nil
	}
	return nil, errStaleFence()
}

func (q *fakeQueue) Nack(_ context.Context, req *docketv1.NackRequest) (*docketv1.NackResponse, error) {
	fc := q.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.nacks = append(fc.nacks, proto.Clone(req).(*docketv1.NackRequest))
	t, ok := fc.tasks[req.GetTaskId()]
	if !ok {
		return nil, status.Error(codes.NotFound, "no task "+req.GetTaskId())
	}
	if t.GetState() != docketv1.TaskState_TASK_STATE_RUNNING || t.GetFence() != req.GetFence() {
		return nil, errStaleFence()
	}
	t.Attempts++
	t.LastError = req.GetReason()
	t.State = docketv1.TaskState_TASK_STATE_PENDING
	fc.pending = append(fc.pending, t.GetId())
	fc.notifyLocked()
	return &docketv1.NackResponse{State: t.GetState()}, nil
}

func (q *fakeQueue) Cancel(_ context.Context, req *docketv1.CancelRequest) (*docketv1.CancelResponse, error) {
	fc := q.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	t, ok := fc.tasks[req.GetTaskId()]
	if !ok {
		return nil, status.Error(codes.NotFound, "no task "+req.GetTaskId())
	}
	if t.GetState() != docketv1.TaskState_TASK_STATE_PENDING {
		return nil, errWrongState()
	}
	t.State = docketv1.TaskState_TASK_STATE_CANCELLED
	fc.pending = slices.DeleteFunc(fc.pending, func(p string) bool { return p == t.GetId() })
	fc.notifyLocked()
	return &docketv1.CancelResponse{}, nil
}

func (q *fakeQueue) GetTask(_ context.Context, req *docketv1.GetTaskRequest) (*docketv1.GetTaskResponse, error) {
	t := q.fc.task(req.GetTaskId())
	if t == nil {
		return nil, status.Error(codes.NotFound, "no task "+req.GetTaskId())
	}
	return &docketv1.GetTaskResponse{Task: t}, nil
}

func (q *fakeQueue) WaitResult(ctx context.Context, req *docketv1.WaitResultRequest) (*docketv1.WaitResultResponse, error) {
	fc := q.fc
	resp := &docketv1.WaitResultResponse{}
	var found bool
	err := fc.waitChange(ctx, time.Duration(req.GetWaitNs()), func() bool {
		t, ok := fc.tasks[req.GetTaskId()]
		found = ok
		if ok && terminal(t.GetState()) {
			resp.Task, resp.Done = proto.Clone(t).(*docketv1.Task), true
		}
		return !ok || resp.Done
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, status.Error(codes.NotFound, "no task "+req.GetTaskId())
	}
	return resp, nil
}

func (q *fakeQueue) Stats(_ context.Context, req *docketv1.StatsRequest) (*docketv1.StatsResponse, error) {
	fc := q.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	st := &docketv1.QueueStats{Queue: req.GetQueue(), Tenant: tenantOf(req.GetTenant())}
	for _, t := range fc.tasks {
		if t.GetQueue() != req.GetQueue() {
			continue
		}
		switch t.GetState() {
		case docketv1.TaskState_TASK_STATE_PENDING:
			st.Pending++
		case docketv1.TaskState_TASK_STATE_RUNNING:
			st.Running++
		default:
			st.Completed++
		}
	}
	return &docketv1.StatsResponse{Queues: []*docketv1.QueueStats{st}}, nil
}

// Test helpers.

// testLogger discards logs unless DOCKET_TEST_LOG is set: a goroutine that
// logs through t after its test ended would panic.
func testLogger() *slog.Logger {
	if os.Getenv("DOCKET_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// mustClient returns a client with fast retries, closed at cleanup.
func mustClient(t testing.TB, addrs ...string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := New(ctx, addrs, WithLogger(testLogger()), WithRetryBackoff(time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
