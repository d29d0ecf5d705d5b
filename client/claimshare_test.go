package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/cluster/memnode"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/internal/testwait"
	docketv1 "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/transport"
)

// ClaimBatch answers each item as a Claim without a wait, in order.
func (q *fakeQueue) ClaimBatch(_ context.Context, req *docketv1.ClaimBatchRequest) (*docketv1.ClaimBatchResponse, error) {
	fc := q.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.noClaimBatch {
		return nil, status.Error(codes.Unimplemented, "unknown method ClaimBatch for service docket.v1.Queue")
	}
	for i, it := range req.GetItems() {
		if fc.deniedTenant != "" && it.GetTenant() == fc.deniedTenant {
			return nil, status.Error(codes.PermissionDenied, "the token does not grant tenant "+it.GetTenant())
		}
		if it.GetWaitNs() != 0 {
			return nil, errBadField(fmt.Sprintf("items[%d].wait_ns", i), "must be 0")
		}
		if it.GetQueue() == "" {
			return nil, errBadField(fmt.Sprintf("items[%d].queue", i), "must not be empty")
		}
	}
	resp := &docketv1.ClaimBatchResponse{}
	for _, it := range req.GetItems() {
		fc.claimMax = append(fc.claimMax, it.GetMaxTasks())
		resp.Items = append(resp.Items, &docketv1.ClaimResponse{Tasks: fc.claimLocked(it)})
	}
	return resp, nil
}

// claimer is caller i of the claim-sharing tests: its own worker id,
// lease and max_tasks (1..3).
func claimer(queue string, i int) *docketv1.ClaimRequest {
	return &docketv1.ClaimRequest{
		Queue: queue, WorkerId: fmt.Sprint("w", i), MaxTasks: uint32(i%3 + 1), LeaseNs: int64(time.Minute + time.Duration(i)*time.Second),
	}
}

// checkOwnTasks fails unless every caller got exactly its max_tasks, each
// under its own worker id and lease, and no task went to two callers.
func checkOwnTasks(t *testing.T, reqs []*docketv1.ClaimRequest, got [][]*docketv1.Task, errs []error) {
	t.Helper()
	seen := map[string]string{}
	for i, req := range reqs {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if len(got[i]) != int(req.GetMaxTasks()) {
			t.Fatalf("caller %d asked for %d tasks and got %d", i, req.GetMaxTasks(), len(got[i]))
		}
		for _, task := range got[i] {
			if w, dup := seen[task.GetId()]; dup {
				t.Fatalf("task %s went to %s and %s", task.GetId(), w, req.GetWorkerId())
			}
			seen[task.GetId()] = req.GetWorkerId()
			if task.GetWorkerId() != req.GetWorkerId() || task.GetLeaseNs() != req.GetLeaseNs() || task.GetFence() == 0 {
				t.Fatalf("caller %s got a task of worker %q, lease %v, fence %d", req.GetWorkerId(),
					task.GetWorkerId(), time.Duration(task.GetLeaseNs()), task.GetFence())
			}
		}
	}
}

// Test_ConcurrentClaimsShareOneBatch holds the client's only Claim slot,
// queues ten claimers behind it, and checks that they share one ClaimBatch
// while each gets its own tasks; and that against a server without
// ClaimBatch each claims alone.
func Test_ConcurrentClaimsShareOneBatch(t *testing.T) {
	const n = 10
	for _, c := range []struct {
		name         string
		noClaimBatch bool
		claims       int // Claim RPCs: the first, and n more if the batch is unknown
	}{
		{"shared", false, 1},
		{"older server", true, 1 + n},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := newFakeCluster(t, 1)
			fc.noClaimBatch = c.noClaimBatch
			cl, ctx := sharingClient(t, fc)
			reqs := make([]*docketv1.ClaimRequest, n)
			for i := range reqs {
				reqs[i] = claimer("q", i)
				for range reqs[i].GetMaxTasks() {
					mustEnqueue(t, cl, "q", "x")
				}
			}
			mustEnqueue(t, cl, "q", "first")
			got, errs := fakeClaimsBehindHeldSlot(t, ctx, fc, cl, reqs)
			checkOwnTasks(t, reqs, got, errs)
			if cl, cb := fc.count(0, "Claim"), fc.count(0, "ClaimBatch"); cl != c.claims || cb != 1 {
				t.Fatalf("%d Claim and %d ClaimBatch RPCs, want %d and 1", cl, cb, c.claims)
			}
		})
	}
}

// sharingClient is a client of fc with one RPC of each kind in flight
// before calls share, and a 5 s context for the test's calls.
func sharingClient(t *testing.T, fc *fakeCluster) (*Client, context.Context) {
	t.Helper()
	ctx := ctxTimeout(t, 5*time.Second)
	cl, err := New(ctx, fc.addrs(), WithLogger(testLogger()), WithSharedRPCs(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl, ctx
}

// fakeClaimsBehindHeldSlot is claimBehindHeldSlot on the fake cluster: its
// first Claim RPC is held until every claimer has queued.
func fakeClaimsBehindHeldSlot(t *testing.T, ctx context.Context, fc *fakeCluster, cl *Client,
	reqs []*docketv1.ClaimRequest) ([][]*docketv1.Task, []error) {
	t.Helper()
	held, release := fc.holdFirst(t, "Claim")
	defer fc.setHooks(nil, nil)
	return claimBehindHeldSlot(t, ctx, cl, reqs, release, func() bool { return held() == 1 })
}

// Test_OlderServerIsRememberedForAWhile: once a server answers ClaimBatch
// Unimplemented, the next shared claims go alone at once rather than
// asking again (and paying an extra RPC) on every shared batch; after the
// pause they ask again, and share once the server has ClaimBatch.
func Test_OlderServerIsRememberedForAWhile(t *testing.T) {
	const n = 4
	fc := newFakeCluster(t, 1)
	fc.noClaimBatch = true
	cl, ctx := sharingClient(t, fc)
	reqs := make([]*docketv1.ClaimRequest, n)
	for i := range reqs {
		reqs[i] = claimer("q", i)
	}
	// Set before the first call, which the sharer's goroutines see after.
	cl.clm.retryShared = 2 * time.Second
	round := func() {
		t.Helper()
		for _, req := range reqs {
			for range req.GetMaxTasks() {
				mustEnqueue(t, cl, "q", "x")
			}
		}
		mustEnqueue(t, cl, "q", "first")
		got, errs := fakeClaimsBehindHeldSlot(t, ctx, fc, cl, reqs)
		checkOwnTasks(t, reqs, got, errs)
	}
	for i := range 2 {
		round()
		if cb := fc.count(0, "ClaimBatch"); cb != 1 {
			t.Fatalf("round %d: %d ClaimBatch RPCs, want only the first round's", i, cb)
		}
	}
	if got, want := fc.count(0, "Claim"), 2*(1+n); got != want {
		t.Fatalf("%d Claim RPCs, want %d", got, want)
	}

	// The upgrade reaches the leader; once the pause ends, claims share again.
	fc.mu.Lock()
	fc.noClaimBatch = false
	fc.mu.Unlock()
	s := cl.clm
	testwait.For(t, 5*time.Second, "the pause to end", func() bool { return time.Since(s.born) >= time.Duration(s.sharedOffUntil.Load()) })
	round()
	if cb, c := fc.count(0, "ClaimBatch"), fc.count(0, "Claim"); cb != 2 || c != 2*(1+n)+1 {
		t.Fatalf("after the pause: %d ClaimBatch and %d Claim RPCs, want 2 and %d", cb, c, 2*(1+n)+1)
	}
}

// Test_SharedClaimSplitsOnPermissionDenied: a token may grant one
// claimer's tenant and not another's. A shared ClaimBatch refused with
// PermissionDenied claims nothing, so each claimer asks alone and gets its
// own answer: tasks for the granted tenant, PermissionDenied for the other.
func Test_SharedClaimSplitsOnPermissionDenied(t *testing.T) {
	const n = 4
	fc := newFakeCluster(t, 1)
	fc.deniedTenant = "secret"
	cl, ctx := sharingClient(t, fc)
	reqs := make([]*docketv1.ClaimRequest, n)
	for i := range reqs {
		reqs[i] = claimer("q", i)
		if i%2 == 1 {
			reqs[i].Tenant = "secret"
			continue
		}
		for range reqs[i].GetMaxTasks() {
			mustEnqueue(t, cl, "q", "x")
		}
	}
	mustEnqueue(t, cl, "q", "first")
	got, errs := fakeClaimsBehindHeldSlot(t, ctx, fc, cl, reqs)
	for i := range reqs {
		if i%2 == 1 {
			if !errors.Is(errs[i], ErrPermissionDenied) {
				t.Fatalf("claimer %d of a denied tenant: %v, want ErrPermissionDenied", i, errs[i])
			}
			continue
		}
		checkOwnTasks(t, reqs[i:i+1], got[i:i+1], errs[i:i+1])
	}
	if cl, cb := fc.count(0, "Claim"), fc.count(0, "ClaimBatch"); cl != 1+n || cb != 1 {
		t.Fatalf("%d Claim and %d ClaimBatch RPCs, want %d and 1", cl, cb, 1+n)
	}
}

// realServer is a one-node cluster (memnode.Node: the production
// Service and FSM, with Raft replaced by an apply in place) behind the
// production gRPC server on loopback.
type realServer struct {
	node *memnode.Node
	addr string
}

func startRealServer(t *testing.T) *realServer {
	t.Helper()
	node, err := memnode.New(t.TempDir(), true, service.ServiceConfig{})
	if err != nil {
		t.Fatalf("mem node: %v", err)
	}
	t.Cleanup(func() {
		if err := node.Close(); err != nil {
			t.Errorf("close mem node: %v", err)
		}
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	node.SetLeaderAddr(lis.Addr().String())
	srv := transport.NewServer(node, transport.Config{})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &realServer{node: node, addr: lis.Addr().String()}
}

// rpcCounter counts a client's RPCs by method, and its Claims with a wait.
type rpcCounter struct {
	mu        sync.Mutex
	calls     map[string]int
	longPolls int
}

func (c *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.calls[path.Base(method)]++
	if r, ok := req.(*docketv1.ClaimRequest); ok && r.GetWaitNs() > 0 {
		c.longPolls++
	}
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *rpcCounter) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

func (c *rpcCounter) polls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.longPolls
}

// countedClient is a client of addr whose RPCs cnt counts.
func countedClient(t *testing.T, addr string, cnt *rpcCounter, opts ...Option) *Client {
	t.Helper()
	cnt.calls = map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	opts = append([]Option{WithLogger(testLogger()), WithDialOptions(grpc.WithChainUnaryInterceptor(cnt.intercept))}, opts...)
	cl, err := New(ctx, []string{addr}, opts...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// Test_ConcurrentClaimsShareOnARealServer: 32 claimers of one client, each
// with its own worker id, lease and max_tasks, against the real server:
// every task is claimed exactly once, by the caller it was answered to
// (the server's record says so too), in fewer RPCs than callers.
func Test_ConcurrentClaimsShareOnARealServer(t *testing.T) {
	rs := startRealServer(t)
	var cnt rpcCounter
	cl := countedClient(t, rs.addr, &cnt, WithSharedRPCs(1))
	ctx := ctxTimeout(t, 10*time.Second)
	const n = 32
	reqs := make([]*docketv1.ClaimRequest, n)
	var tasks []*docketv1.NewTask
	for i := range reqs {
		reqs[i] = claimer("q", i)
		for range reqs[i].GetMaxTasks() {
			tasks = append(tasks, &docketv1.NewTask{Queue: "q"})
		}
	}
	tasks = append(tasks, &docketv1.NewTask{Queue: "q"}) // the first caller's
	if _, err := cl.Enqueue(ctx, tasks...); err != nil {
		t.Fatal(err)
	}

	// The first claim's proposal waits, so its RPC holds the only slot
	// while the others queue behind it.
	release := rs.node.Hold()
	defer release()
	got, errs := claimBehindHeldSlot(t, ctx, cl, reqs, release, func() bool { return rs.node.Held() == 1 })

	checkOwnTasks(t, reqs, got, errs)
	for i, req := range reqs {
		for _, task := range got[i] {
			stored, err := rs.node.FSM().GetTask(task.GetId())
			if err != nil || stored.GetState() != docketv1.TaskState_TASK_STATE_RUNNING ||
				stored.GetWorkerId() != req.GetWorkerId() || stored.GetFence() != task.GetFence() {
				t.Fatalf("server's record of %s: %v (%v), want running for %s", task.GetId(), stored, err, req.GetWorkerId())
			}
		}
	}
	if rpcs := cnt.count("Claim") + cnt.count("ClaimBatch"); rpcs >= n+1 {
		t.Fatalf("%d Claim and ClaimBatch RPCs for %d callers: nothing was shared", rpcs, n+1)
	}
	if c, b := cnt.count("Claim"), cnt.count("ClaimBatch"); c != 1 || b != 1 {
		t.Fatalf("%d Claim and %d ClaimBatch RPCs, want 1 and 1", c, b)
	}
}

// Test_LongPollClaimLeavesSharedSlotsFree: a long-poll claimer on an empty
// queue, while another claim is under way (here a bystander's long poll),
// tries with the others, then waits on its own RPC, so a claim without a
// wait from another goroutine answers at once meanwhile, through the
// client's only slot; and the poller gets a task enqueued during its
// wait as soon as it comes.
func Test_LongPollClaimLeavesSharedSlotsFree(t *testing.T) {
	rs := startRealServer(t)
	var cnt rpcCounter
	cl := countedClient(t, rs.addr, &cnt, WithSharedRPCs(1))
	ctx := ctxTimeout(t, 10*time.Second)

	type result struct {
		tasks []*docketv1.Task
		err   error
	}
	bystander := make(chan result, 1)
	go func() {
		tasks, err := cl.Claim(ctx, &docketv1.ClaimRequest{Queue: "idle", WorkerId: "bystander", MaxTasks: 1, WaitNs: int64(3 * time.Second)})
		bystander <- result{tasks, err}
	}()
	testwait.For(t, 2*time.Second, "the bystander's lone long poll", func() bool { return cnt.polls() == 1 })

	polled := make(chan result, 1)
	start := time.Now()
	go func() {
		tasks, err := cl.Claim(ctx, &docketv1.ClaimRequest{Queue: "lp", WorkerId: "poller", MaxTasks: 1, WaitNs: int64(2 * time.Second)})
		polled <- result{tasks, err}
	}()
	testwait.For(t, 2*time.Second, "the poller's own long poll", func() bool { return cnt.polls() == 2 })
	if tries := cnt.count("Claim") - cnt.polls(); tries != 1 {
		t.Fatalf("%d Claims without a wait before the poller's poll, want its one try", tries)
	}

	now := mustEnqueue(t, cl, "now", "x")
	asked := time.Now()
	tasks, err := cl.Claim(ctx, &docketv1.ClaimRequest{Queue: "now", WorkerId: "quick", MaxTasks: 1})
	if err != nil || len(tasks) != 1 || tasks[0].GetId() != now {
		t.Fatalf("quick claim: %v, %v; want %s", tasks, err, now)
	}
	if took := time.Since(asked); took > time.Second {
		t.Fatalf("a claim without a wait took %v behind a long poll", took)
	}
	select {
	case r := <-polled:
		t.Fatalf("the long poll ended before its task came: %v, %v", r.tasks, r.err)
	default:
	}

	// The task comes 300 ms into the poll.
	<-time.After(time.Until(start.Add(300 * time.Millisecond)))
	id := mustEnqueue(t, cl, "lp", "late")
	r := <-polled
	if r.err != nil || len(r.tasks) != 1 || r.tasks[0].GetId() != id {
		t.Fatalf("long poll: %v, %v; want %s", r.tasks, r.err, id)
	}
	if took := time.Since(start); took >= 2*time.Second {
		t.Fatalf("long poll returned after %v, at the end of its wait rather than with the task", took)
	}
	if n := cnt.polls(); n != 2 {
		t.Fatalf("%d long-poll Claims, want the bystander's and the poller's", n)
	}
	if b := <-bystander; b.err != nil || len(b.tasks) != 0 {
		t.Fatalf("bystander's poll of an empty queue: %v, %v", b.tasks, b.err)
	}
}

// Test_LoneLongPollIsOneRPC: a long poll with no other claim under way,
// as a lone Worker's, is one Claim RPC with its wait: no shared try
// before it.
func Test_LoneLongPollIsOneRPC(t *testing.T) {
	rs := startRealServer(t)
	var cnt rpcCounter
	cl := countedClient(t, rs.addr, &cnt, WithSharedRPCs(1))
	ctx := ctxTimeout(t, 10*time.Second)
	for range 3 {
		tasks, err := cl.Claim(ctx, &docketv1.ClaimRequest{Queue: "empty", WorkerId: "w", MaxTasks: 4, WaitNs: int64(50 * time.Millisecond)})
		if err != nil || len(tasks) != 0 {
			t.Fatalf("long poll of an empty queue: %v, %v", tasks, err)
		}
	}
	if c, cb, p := cnt.count("Claim"), cnt.count("ClaimBatch"), cnt.polls(); c != 3 || cb != 0 || p != 3 {
		t.Fatalf("%d Claim (%d with a wait) and %d ClaimBatch RPCs for 3 lone long polls, want 3 (3) and 0", c, p, cb)
	}
}

// Test_ConcurrentHeartbeatsShareOneRPC holds the client's only Heartbeat
// slot, queues ten callers behind it, and checks that they share one RPC
// while each gets the results of its own items, a stale one included.
func Test_ConcurrentHeartbeatsShareOneRPC(t *testing.T) {
	fc := newFakeCluster(t, 1)
	cl, ctx := sharingClient(t, fc)
	const n = 10
	for i := range n + 1 {
		mustEnqueue(t, cl, "q", fmt.Sprint(i))
	}
	tasks, err := cl.Claim(ctx, &docketv1.ClaimRequest{Queue: "q", WorkerId: "w", MaxTasks: n + 1, LeaseNs: int64(time.Minute)})
	if err != nil || len(tasks) != n+1 {
		t.Fatalf("claim: %d tasks, %v", len(tasks), err)
	}
	held, release := fc.holdFirst(t, "Heartbeat")
	beat := func(tk *docketv1.Task, fence uint64) ([]*docketv1.ItemResult, error) {
		return cl.Heartbeat(ctx, &docketv1.HeartbeatItem{TaskId: tk.GetId(), Fence: fence})
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := beat(tasks[n], tasks[n].GetFence()); err != nil {
			t.Errorf("first heartbeat: %v", err)
		}
	}()
	testwait.For(t, 5*time.Second, "the first heartbeat to hold the slot", func() bool { return held() == 1 })
	got, errs := make([][]*docketv1.ItemResult, n), make([]error, n)
	for i := range n {
		fence := tasks[i].GetFence()
		if i == 3 {
			fence++ // this caller's lease is gone
		}
		wg.Add(1)
		go func() { defer wg.Done(); got[i], errs[i] = beat(tasks[i], fence) }()
	}
	testwait.For(t, 5*time.Second, "every heartbeat to queue", func() bool { return cl.hb.lane.Queued() == n-1 })
	release()
	wg.Wait()
	for i := range n {
		if errs[i] != nil || len(got[i]) != 1 || got[i][0].GetTaskId() != tasks[i].GetId() {
			t.Fatalf("caller %d: %v, %v; want the result of %s", i, got[i], errs[i], tasks[i].GetId())
		}
		want := docketv1.Code_CODE_OK
		if i == 3 {
			want = docketv1.Code_CODE_STALE_FENCE
		}
		if code := got[i][0].GetCode(); code != want {
			t.Fatalf("caller %d: code %v, want %v", i, code, want)
		}
	}
	if h := fc.count(0, "Heartbeat"); h != 2 {
		t.Fatalf("%d Heartbeat RPCs for %d callers, want 2", h, n+1)
	}
}

// claimBehindHeldSlot sends a first claim of queue "q" that the server
// holds (held reports it held), so its RPC keeps the client's only claim
// slot; queues a Claim of each of reqs behind it; then lets it go with
// release and returns what each of reqs got.
func claimBehindHeldSlot(t *testing.T, ctx context.Context, cl *Client, reqs []*docketv1.ClaimRequest,
	release func(), held func() bool) ([][]*docketv1.Task, []error) {
	t.Helper()
	n := len(reqs)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := cl.Claim(ctx, &docketv1.ClaimRequest{Queue: "q", WorkerId: "first", MaxTasks: 1}); err != nil {
			t.Errorf("first claim: %v", err)
		}
	}()
	testwait.For(t, 5*time.Second, "the first claim to hold the slot", held)
	got, errs := make([][]*docketv1.Task, n), make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = cl.Claim(ctx, reqs[i])
		}()
	}
	// The sharer has taken one of them and waits for the slot with it.
	testwait.For(t, 5*time.Second, "every claimer to queue", func() bool { return cl.clm.lane.Queued() == n-1 })
	release()
	wg.Wait()
	return got, errs
}
