package client

import (
	"context"
	"fmt"
	"net"
	"path"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// fakeCluster is a few gRPC servers on loopback that share one in-memory
// queue. Only the leader node answers Queue calls; the others answer
// Unavailable with the leader's address in "docket-leader", which is what a
// follower that cannot forward does. Hooks inject failures on the leader.
type fakeCluster struct {
	t     testing.TB
	nodes []*fakeNode

	mu         sync.Mutex
	leader     int // index into nodes; -1: no leader
	tasks      map[string]*docketv1.Task
	pending    []string
	keys       map[string]string
	seenKeys   []string
	nextID     int
	fence      uint64
	calls      []map[string]int // per node: every call by method name
	claimMax   []uint32         // max_tasks of every Claim the leader handled
	claimWaits []int64          // wait_ns of every Claim RPC the leader handled
	heartbeats [][]*docketv1.HeartbeatItem
	submits    []*docketv1.SubmitRequest
	nacks      []*docketv1.NackRequest
	staleHB    map[string]bool // task ids whose heartbeats answer STALE_FENCE
	// noClaimBatch makes the leader answer ClaimBatch Unimplemented, as a
	// server older than it does.
	noClaimBatch bool
	// deniedTenant, when set, is a tenant the caller's token does not
	// grant: a Claim or ClaimBatch naming it is PermissionDenied.
	deniedTenant string
	// hintInErrorOnly makes followers name the leader only in the
	// ErrorInfo of a NOT_LEADER answer, not in the metadata.
	hintInErrorOnly bool
	changed         chan struct{} // closed and replaced on every change
	// frozen nodes take every call and answer none, as a process stopped
	// with SIGSTOP does (its kernel still accepts connections).
	frozen map[int]bool
	// before runs on the leader before the handler; a non-nil error is the
	// answer. after runs after a successful handler and replaces its answer,
	// to simulate a reply lost after the command was applied.
	before, after func(method string) error
}

type fakeNode struct {
	fc   *fakeCluster
	idx  int
	id   string
	addr string
	srv  *grpc.Server
}

func newFakeCluster(t testing.TB, n int) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{
		t:       t,
		tasks:   make(map[string]*docketv1.Task),
		keys:    make(map[string]string),
		staleHB: make(map[string]bool),
		changed: make(chan struct{}),
		frozen:  make(map[int]bool),
	}
	var wg sync.WaitGroup
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		node := &fakeNode{fc: fc, idx: i, id: fmt.Sprintf("node%d", i), addr: lis.Addr().String()}
		node.srv = grpc.NewServer(grpc.UnaryInterceptor(node.intercept))
		docketv1.RegisterQueueServer(node.srv, &fakeQueue{fc: fc})
		docketv1.RegisterClusterServer(node.srv, &fakeClusterSvc{node: node})
		fc.nodes = append(fc.nodes, node)
		fc.calls = append(fc.calls, make(map[string]int))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = node.srv.Serve(lis)
		}()
	}
	t.Cleanup(func() {
		for _, n := range fc.nodes {
			n.srv.Stop()
		}
		wg.Wait()
	})
	return fc
}

func (fc *fakeCluster) addr(i int) string { return fc.nodes[i].addr }

func (fc *fakeCluster) addrs() []string {
	var out []string
	for _, n := range fc.nodes {
		out = append(out, n.addr)
	}
	return out
}

func (fc *fakeCluster) setLeader(i int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.leader = i
}

// freeze makes node i take calls and answer none, and moves leadership
// to newLeader, as the others would elect one.
func (fc *fakeCluster) freeze(i, newLeader int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.frozen[i] = true
	fc.leader = newLeader
}

// stopNode makes a node unreachable: its listener closes, so dials fail.
func (fc *fakeCluster) stopNode(i int) { fc.nodes[i].srv.Stop() }

func (fc *fakeCluster) setHooks(before, after func(method string) error) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.before, fc.after = before, after
}

func (fc *fakeCluster) count(node int, method string) int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.calls[node][method]
}

func (fc *fakeCluster) countAll(method string) int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	n := 0
	for _, m := range fc.calls {
		n += m[method]
	}
	return n
}

// longPolls counts the Claim RPCs with a wait the leader handled.
func (fc *fakeCluster) longPolls() int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	n := 0
	for _, w := range fc.claimWaits {
		if w > 0 {
			n++
		}
	}
	return n
}

func (fc *fakeCluster) task(id string) *docketv1.Task {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if t, ok := fc.tasks[id]; ok {
		return proto.Clone(t).(*docketv1.Task)
	}
	return nil
}

func (fc *fakeCluster) leaderAddrLocked() string {
	if fc.leader < 0 {
		return ""
	}
	return fc.nodes[fc.leader].addr
}

// notifyLocked wakes long-polls.
func (fc *fakeCluster) notifyLocked() {
	close(fc.changed)
	fc.changed = make(chan struct{})
}

// intercept does what the real transport promises: the leader hint on
// every answer, Unavailable from a node that is not the leader.
func (n *fakeNode) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	fc := n.fc
	method := path.Base(info.FullMethod)
	fc.mu.Lock()
	leaderAddr := fc.leaderAddrLocked()
	isLeader := fc.leader == n.idx
	fc.calls[n.idx][method]++
	before, after := fc.before, fc.after
	errorOnly := fc.hintInErrorOnly && !isLeader
	frozen := fc.frozen[n.idx]
	fc.mu.Unlock()

	if frozen {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if errorOnly {
		st, err := status.New(codes.Unavailable, "not the leader").WithDetails(&errdetails.ErrorInfo{
			Reason: docketv1.ReasonNotLeader, Domain: docketv1.ErrorDomain, Metadata: map[string]string{docketv1.ErrorInfoLeaderKey: leaderAddr},
		})
		if err != nil {
			panic(err)
		}
		return nil, st.Err()
	}
	if leaderAddr != "" {
		_ = grpc.SetHeader(ctx, metadata.Pairs(LeaderMetadataKey, leaderAddr))
	}
	stale := false
	if g, ok := req.(*docketv1.GetTaskRequest); ok && g.GetAllowStale() {
		stale = true
	}
	if method == "Status" || stale {
		return handler(ctx, req)
	}
	if !isLeader {
		if leaderAddr != "" {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(LeaderMetadataKey, leaderAddr))
		}
		return nil, status.Error(codes.Unavailable, "not the leader")
	}
	if before != nil {
		if err := before(method); err != nil {
			return nil, err
		}
	}
	resp, err := handler(ctx, req)
	if err == nil && after != nil {
		if aerr := after(method); aerr != nil {
			return nil, aerr
		}
	}
	return resp, err
}

// Status errors as the real transport builds them.

func errLeadershipLost() error { return withInfo(codes.Unavailable, docketv1.ReasonLeadershipLost) }
func errStaleFence() error     { return withInfo(codes.FailedPrecondition, docketv1.ReasonStaleFence) }
func errWrongState() error     { return withInfo(codes.FailedPrecondition, docketv1.ReasonWrongState) }

func withInfo(c codes.Code, reason string) error {
	st, err := status.New(c, reason).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: docketv1.ErrorDomain})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func errBadField(field, desc string) error {
	st, err := status.New(codes.InvalidArgument, desc).WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: desc}},
	})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// holdFirst makes the leader hold the first call of method until
// release, so that later calls queue behind it; held counts the calls of
// method so far. release may run more than once, and runs at the test's
// end.
func (fc *fakeCluster) holdFirst(t testing.TB, method string) (held func() int32, release func()) {
	return fc.holdCalls(t, method, func(n int32) bool { return n == 1 })
}

// holdAll makes the leader hold every call of method until release;
// held counts them. release may run more than once, and runs at the
// test's end.
func (fc *fakeCluster) holdAll(t testing.TB, method string) (held func() int32, release func()) {
	return fc.holdCalls(t, method, func(int32) bool { return true })
}

// holdCalls holds the n-th call of method (counted from 1) until release
// when hold(n); it is holdFirst and holdAll.
func (fc *fakeCluster) holdCalls(t testing.TB, method string, hold func(n int32) bool) (held func() int32, release func()) {
	gate := make(chan struct{})
	var n atomic.Int32
	fc.setHooks(func(m string) error {
		if m == method && hold(n.Add(1)) {
			<-gate
		}
		return nil
	}, nil)
	release = sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	return n.Load, release
}

// errFeatureDisabled is a server's refusal of a request that needs a
// feature level the cluster has not latched.
func errFeatureDisabled() error {
	st, err := status.New(codes.FailedPrecondition, "feature disabled").WithDetails(&errdetails.ErrorInfo{
		Reason: docketv1.ReasonFeatureDisabled, Domain: docketv1.ErrorDomain,
	})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

type fakeClusterSvc struct {
	docketv1.UnimplementedClusterServer
	node *fakeNode
}

func (s *fakeClusterSvc) Status(context.Context, *docketv1.StatusRequest) (*docketv1.StatusResponse, error) {
	fc := s.node.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	resp := &docketv1.StatusResponse{NodeId: s.node.id, State: "Follower", LeaderGrpcAddr: fc.leaderAddrLocked()}
	if fc.leader == s.node.idx {
		resp.State = "Leader"
	}
	for _, n := range fc.nodes {
		resp.Servers = append(resp.Servers, &docketv1.Server{Id: n.id, GrpcAddr: n.addr, Leader: n.idx == fc.leader})
	}
	return resp, nil
}

func (s *fakeClusterSvc) TransferLeadership(_ context.Context, req *docketv1.TransferLeadershipRequest) (*docketv1.TransferLeadershipResponse, error) {
	fc := s.node.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for _, n := range fc.nodes {
		if n.id == req.GetToId() {
			fc.leader = n.idx
			return &docketv1.TransferLeadershipResponse{LeaderId: n.id}, nil
		}
	}
	return nil, errBadField("to_id", "no such server")
}
