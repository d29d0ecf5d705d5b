package transport

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

func orderp(o pb.QueueOrder) *pb.QueueOrder         { return &o }
func pendingp(p pb.PerKeyPending) *pb.PerKeyPending { return &p }

// Test_FairQueueBadValuesNameTheirField: each bound of the fair queues'
// values is refused where the request arrives, InvalidArgument naming
// the field, before anything is proposed.
func Test_FairQueueBadValuesNameTheirField(t *testing.T) {
	l := mustLeader(t, Config{})
	f := mustFollower(t, l.addr, Config{})
	ctx := testCtx(t)
	before := l.node.FSM().AppliedIndex()
	_, err := f.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}, {Queue: "q", Key: bytes.Repeat([]byte("k"), 257)}}})
	wantErr(t, err, codes.InvalidArgument, "", "tasks[1].key")
	for _, c := range []struct {
		req   *pb.SetQueueLimitsRequest
		field string
	}{
		{&pb.SetQueueLimitsRequest{Queue: "q", Order: orderp(7)}, "order"},
		{&pb.SetQueueLimitsRequest{Queue: "q", PerKeyPending: pendingp(9), PerKeyPendingDepth: u32p(1)}, "per_key_pending"},
		{&pb.SetQueueLimitsRequest{Queue: "q", PerKeyPending: pendingp(pb.PerKeyPending_PER_KEY_PENDING_KEEP_NEWEST)}, "per_key_pending_depth"},
		{&pb.SetQueueLimitsRequest{Queue: "q", PerKeyPending: pendingp(pb.PerKeyPending_PER_KEY_PENDING_KEEP_OLDEST), PerKeyPendingDepth: u32p(0)}, "per_key_pending_depth"},
		{&pb.SetQueueLimitsRequest{Queue: "q", PerKeyPendingDepth: u32p(10_001)}, "per_key_pending_depth"},
		{&pb.SetQueueLimitsRequest{Tenant: "a", MaxRunningPerKey: u32p(2)}, "max_running_per_key"},
	} {
		_, err := f.q.SetQueueLimits(ctx, c.req)
		wantErr(t, err, codes.InvalidArgument, "", c.field)
	}
	for _, c := range []struct {
		req   *pb.SetKeyLimitRequest
		field string
	}{
		{&pb.SetKeyLimitRequest{Queue: "q", MaxRunning: u32p(1)}, "key"},
		{&pb.SetKeyLimitRequest{Queue: "q", Key: bytes.Repeat([]byte("k"), 257), MaxRunning: u32p(1)}, "key"},
		{&pb.SetKeyLimitRequest{Queue: "q", Key: []byte("k")}, "max_running"},
		{&pb.SetKeyLimitRequest{Queue: "q", Key: []byte("k"), Weight: u32p(1001)}, "weight"},
		{&pb.SetKeyLimitRequest{Queue: "a/b", Key: []byte("k"), Weight: u32p(1)}, "queue"},
	} {
		_, err := f.q.SetKeyLimit(ctx, c.req)
		wantErr(t, err, codes.InvalidArgument, "", c.field)
	}
	_, err = f.q.ListKeys(ctx, &pb.ListKeysRequest{Queue: "q", Limit: fsm.MaxKeysLimit + 1})
	wantErr(t, err, codes.InvalidArgument, "", "limit")
	_, err = f.q.ListKeys(ctx, &pb.ListKeysRequest{})
	wantErr(t, err, codes.InvalidArgument, "", "queue")
	if got := l.node.FSM().AppliedIndex(); got != before {
		t.Fatalf("refused requests were proposed: applied %d → %d", before, got)
	}
	// A good ListKeys from the follower is forwarded and answered; an
	// unkeyed queue says so.
	if lk, err := f.q.ListKeys(ctx, &pb.ListKeysRequest{Queue: "q", Limit: fsm.MaxKeysLimit}); err != nil || lk.GetKeyed() {
		t.Fatalf("ListKeys of an unkeyed queue through a follower: %v %v", lk, err)
	}
}

// Test_FairQueueFieldsNeedLevel16: a keyed task and the per-key fields of
// SetQueueLimits are refused FailedPrecondition (FEATURE_DISABLED) by a
// cluster that has not latched level 16, before anything is proposed,
// so a rolling upgrade never applies them on an older node.
func Test_FairQueueFieldsNeedLevel16(t *testing.T) {
	l := mustLeader(t, Config{})
	ctx := testCtx(t)
	l.node.SetEnabledLevel(fsm.LevelFairQueues - 1)
	_, err := l.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Key: []byte("acme")}}})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonFeatureDisabled, "")
	_, err = l.q.SetQueueLimits(ctx, &pb.SetQueueLimitsRequest{Queue: "q", MaxRunning: u32p(5), Order: orderp(pb.QueueOrder_QUEUE_ORDER_FAIR)})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonFeatureDisabled, "")
	// A keyless task and the older limits still work.
	mustEnqueue(t, l.q, &pb.NewTask{Queue: "q"})
	if _, err := l.q.SetQueueLimits(ctx, &pb.SetQueueLimitsRequest{Queue: "q", MaxRunning: u32p(5)}); err != nil {
		t.Fatalf("max_running alone below level 16: %v", err)
	}
}

// Test_SetKeyLimitNeedsLevel16: SetKeyLimit, a command of level 16, is
// refused FEATURE_DISABLED below it. It needs the FSM to validate the
// command (fsm.ValidateAt knows COMMAND_TYPE_SET_KEY_LIMIT).
func Test_SetKeyLimitNeedsLevel16(t *testing.T) {
	l := mustLeader(t, Config{})
	ctx := testCtx(t)
	l.node.SetEnabledLevel(fsm.LevelFairQueues - 1)
	_, err := l.q.SetKeyLimit(ctx, &pb.SetKeyLimitRequest{Queue: "q", Key: []byte("acme"), MaxRunning: u32p(3)})
	wantErr(t, err, codes.FailedPrecondition, pb.ReasonFeatureDisabled, "")
}

// Test_FairQueueOverGRPC: the fair order and per-key limit set through a
// follower, keyed tasks, a claim that takes at most the per-key limit of
// one key, a key's override answered changed then unchanged, and ListKeys
// showing the backlog. It needs the FSM's fair-queue rules.
func Test_FairQueueOverGRPC(t *testing.T) {
	l := mustLeader(t, Config{})
	f := mustFollower(t, l.addr, Config{})
	ctx := testCtx(t)
	if err := l.node.Latch(ctx, fsm.LevelFairQueues); err != nil {
		t.Fatal(err)
	}
	req := &pb.SetQueueLimitsRequest{Queue: "q", MaxRunningPerKey: u32p(1), Order: orderp(pb.QueueOrder_QUEUE_ORDER_FAIR)}
	if r, err := f.q.SetQueueLimits(ctx, req); err != nil || !r.GetChanged() {
		t.Fatalf("set fair: %v %v", r, err)
	}
	if r, err := l.q.SetQueueLimits(ctx, req); err != nil || r.GetChanged() {
		t.Fatalf("the same again: %v %v, want unchanged", r, err)
	}
	var tasks []*pb.NewTask
	for range 5 {
		tasks = append(tasks, &pb.NewTask{Queue: "q", Key: []byte("noisy")})
	}
	tasks = append(tasks, &pb.NewTask{Queue: "q", Key: []byte("quiet")})
	mustEnqueue(t, f.q, tasks...)
	got, err := f.q.GetTask(ctx, &pb.GetTaskRequest{TaskId: mustEnqueue(t, f.q, &pb.NewTask{Queue: "q", Key: []byte("late")})[0]})
	if err != nil || string(got.GetTask().GetKey()) != "late" {
		t.Fatalf("GetTask shows key %q (%v), want late", got.GetTask().GetKey(), err)
	}
	resp, err := l.q.Claim(ctx, &pb.ClaimRequest{Queue: "q", WorkerId: "w", MaxTasks: 10})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	for _, tk := range resp.GetTasks() {
		keys[string(tk.GetKey())]++
	}
	if len(keys) != 3 || keys["noisy"] != 1 || keys["quiet"] != 1 || keys["late"] != 1 {
		t.Fatalf("a claim of 10 under a per-key limit of 1 took %v", keys)
	}
	kr := &pb.SetKeyLimitRequest{Queue: "q", Key: []byte("noisy"), MaxRunning: u32p(3), Weight: u32p(2)}
	if r, err := f.q.SetKeyLimit(ctx, kr); err != nil || !r.GetChanged() {
		t.Fatalf("set key limit: %v %v", r, err)
	}
	if r, err := l.q.SetKeyLimit(ctx, kr); err != nil || r.GetChanged() {
		t.Fatalf("the same key limit again: %v %v, want unchanged", r, err)
	}
	lk, err := f.q.ListKeys(ctx, &pb.ListKeysRequest{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if !lk.GetKeyed() || len(lk.GetByBacklog()) == 0 {
		t.Fatalf("ListKeys: %v", lk)
	}
	top := lk.GetByBacklog()[0]
	if string(top.GetKey()) != "noisy" || top.GetPending() != 4 || top.GetRunning() != 1 || top.GetMaxRunning() != 3 || top.GetWeight() != 2 {
		t.Fatalf("top key by backlog: %v", top)
	}
}

// Test_FairQueueNeedsRoles: a key's override needs admin over the queue's
// tenant; its keys need reader (or admin) over it.
func Test_FairQueueNeedsRoles(t *testing.T) {
	ts := authServer(t)
	ctx := testCtx(t)
	worker := mustToken(t, ts, []string{pb.RoleWorker, pb.RoleProducer}, []string{"a"}, 0)
	readerB := mustToken(t, ts, []string{pb.RoleReader, pb.RoleAdmin}, []string{"b"}, 0)
	readerA := mustToken(t, ts, []string{pb.RoleReader}, []string{"a"}, 0)
	set := &pb.SetKeyLimitRequest{Queue: "q", Tenant: "a", Key: []byte("k"), MaxRunning: u32p(1)}
	for _, secret := range []string{worker.GetSecret(), readerB.GetSecret(), readerA.GetSecret()} {
		_, err := ts.q.SetKeyLimit(as(ctx, secret), set)
		wantCode(t, "a key's limit without admin over a", err, codes.PermissionDenied)
	}
	list := &pb.ListKeysRequest{Queue: "q", Tenant: "a"}
	for _, secret := range []string{worker.GetSecret(), readerB.GetSecret()} {
		_, err := ts.q.ListKeys(as(ctx, secret), list)
		wantCode(t, "keys without reader over a", err, codes.PermissionDenied)
	}
	if _, err := ts.q.ListKeys(as(ctx, readerA.GetSecret()), list); err != nil {
		t.Fatalf("keys by a's reader: %v", err)
	}
}
