package transport

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// fakeNode is a one-node "Raft" over a real FSM: Propose applies at once
// with increasing indexes. As a follower it refuses writes and names a
// leader address, so two fakes over real gRPC test forwarding.
type fakeNode struct {
	fsm    *fsm.FSM
	limits fsm.Limits

	mu       sync.Mutex // one apply at a time, like Raft's apply goroutine
	index    uint64
	proposed map[pb.CommandType]int
	batched  map[pb.CommandType]int // commands inside Batch entries

	leader     atomic.Bool
	leaderAddr atomic.Pointer[string]
	failNext   atomic.Pointer[error]         // the next Propose fails with it
	hold       atomic.Pointer[chan struct{}] // Propose waits until it is closed
	held       atomic.Int32                  // Proposes waiting on hold
	removed    atomic.Pointer[string]
	// applyLate applies a command whose ctx ended while it was held, and
	// then answers the ctx error: what a Raft entry already appended does.
	applyLate atomic.Bool
	problems  atomic.Pointer[[]string] // HealthProblems' answer
	checkErr  atomic.Pointer[error]    // what CheckErr answers; nil means serving
}

func newFakeNode(t *testing.T, leader bool) *fakeNode {
	t.Helper()
	f, err := fsm.Open(t.TempDir(), fsm.Options{})
	if err != nil {
		t.Fatalf("open fsm: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	n := &fakeNode{fsm: f, limits: fsm.DefaultLimits(), proposed: map[pb.CommandType]int{}, batched: map[pb.CommandType]int{}}
	n.leader.Store(leader)
	n.setLeaderAddr("")
	return n
}

func (n *fakeNode) setLeaderAddr(a string) { n.leaderAddr.Store(&a) }
func (n *fakeNode) fail(err error)         { n.failNext.Store(&err) }

func (n *fakeNode) count(t pb.CommandType) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proposed[t]
}

// runs counts t's commands, alone or inside a Batch.
func (n *fakeNode) runs(t pb.CommandType) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proposed[t] + n.batched[t]
}

func (n *fakeNode) notLeader() error { return &notLeaderError{LeaderGRPC: n.LeaderGRPCAddr()} }

func (n *fakeNode) Propose(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	if !n.IsLeader() {
		return nil, n.notLeader()
	}
	if e := n.failNext.Swap(nil); e != nil {
		return nil, *e
	}
	if h := n.hold.Load(); h != nil {
		n.held.Add(1)
		<-*h
		n.held.Add(-1)
	}
	late := ctx.Err()
	if late != nil && !n.applyLate.Load() {
		return nil, late
	}
	cmd.Now = n.Now().UnixNano()
	if err := fsm.Validate(cmd, n.limits); err != nil {
		return nil, err
	}
	data, err := fsm.EncodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.index++
	n.proposed[cmd.GetType()]++
	for _, sub := range cmd.GetBatch().GetCommands() {
		n.batched[sub.GetType()]++
	}
	res, _ := n.fsm.Apply(&raft.Log{Index: n.index, Term: 1, Type: raft.LogCommand, Data: data}).(*pb.CommandResult)
	if late != nil {
		return nil, late // applied, but the answer is lost, as with Raft
	}
	return res, nil
}

func (n *fakeNode) CheckErr() error {
	if p := n.checkErr.Load(); p != nil {
		return *p
	}
	return nil
}
func (n *fakeNode) CheckHash(uint64) string { return "" }
func (n *fakeNode) IsLeader() bool          { return n.leader.Load() }
func (n *fakeNode) LeaderGRPCAddr() string  { return *n.leaderAddr.Load() }
func (n *fakeNode) FSM() *fsm.FSM           { return n.fsm }
func (n *fakeNode) Limits() fsm.Limits      { return n.limits }
func (n *fakeNode) Now() time.Time          { return time.Now() }

func (n *fakeNode) HealthProblems() []string {
	if p := n.problems.Load(); p != nil {
		return *p
	}
	return nil
}

func (n *fakeNode) ReadBarrier(context.Context) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	return nil
}

func (n *fakeNode) StatusWithHash(withHash bool) (*pb.StatusResponse, error) {
	st := &pb.StatusResponse{NodeId: "fake", State: "Follower", LeaderGrpcAddr: n.LeaderGRPCAddr(),
		FsmAppliedIndex: n.fsm.AppliedIndex()}
	if n.IsLeader() {
		st.State = "Leader"
	}
	if withHash {
		h, err := n.fsm.Hash()
		if err != nil {
			return nil, err
		}
		st.KeyspaceHash = h
	}
	return st, nil
}

func (n *fakeNode) TransferLeadership(_ context.Context, toID string) (string, error) {
	if !n.IsLeader() {
		return "", n.notLeader()
	}
	return "to-" + toID, nil
}

func (n *fakeNode) AddServer(context.Context, string, string, string, bool) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	return nil
}

func (n *fakeNode) RemoveServer(_ context.Context, id string) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	n.removed.Store(&id)
	return nil
}

// testServer is a Server on a loopback listener with a client to it.
type testServer struct {
	srv  *Server
	node *fakeNode
	addr string
	cc   *grpc.ClientConn
	q    pb.QueueClient
	c    pb.ClusterClient
}

// mustServe serves node on 127.0.0.1:0. A leader's LeaderGRPCAddr is its
// own address; a follower's is leaderAddr.
func mustServe(t *testing.T, node *fakeNode, leaderAddr string, cfg Config) *testServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := lis.Addr().String()
	if node.IsLeader() {
		leaderAddr = addr
	}
	node.setLeaderAddr(leaderAddr)
	srv := NewServer(node, cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() {
		_ = cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &testServer{srv: srv, node: node, addr: addr, cc: cc, q: pb.NewQueueClient(cc), c: pb.NewClusterClient(cc)}
}

func mustLeader(t *testing.T, cfg Config) *testServer {
	return mustServe(t, newFakeNode(t, true), "", cfg)
}

func mustFollower(t *testing.T, leaderAddr string, cfg Config) *testServer {
	return mustServe(t, newFakeNode(t, false), leaderAddr, cfg)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustEnqueue(t *testing.T, q pb.QueueClient, tasks ...*pb.NewTask) []string {
	t.Helper()
	resp, err := q.Enqueue(testCtx(t), &pb.EnqueueRequest{Tasks: tasks})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	var ids []string
	for _, it := range resp.GetItems() {
		ids = append(ids, it.GetTaskId())
	}
	return ids
}

func mustClaim(t *testing.T, q pb.QueueClient, queue string, n uint32) []*pb.Task {
	t.Helper()
	resp, err := q.Claim(testCtx(t), &pb.ClaimRequest{Queue: queue, WorkerId: "w1", MaxTasks: n})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(resp.GetTasks()) != int(n) {
		t.Fatalf("claimed %d tasks, want %d", len(resp.GetTasks()), n)
	}
	return resp.GetTasks()
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// details reads the code, ErrorInfo reason and BadRequest field of err.
func details(err error) (code codes.Code, reason, field string) {
	st := status.Convert(err)
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			reason = d.GetReason()
		case *errdetails.BadRequest:
			if v := d.GetFieldViolations(); len(v) > 0 {
				field = v[0].GetField()
			}
		}
	}
	return st.Code(), reason, field
}

func wantErr(t *testing.T, err error, code codes.Code, reason, field string) {
	t.Helper()
	c, r, f := details(err)
	if c != code || r != reason || f != field {
		t.Fatalf("got %v reason %q field %q (%v); want %v reason %q field %q", c, r, f, err, code, reason, field)
	}
}

var errBoom = errors.New("boom")
