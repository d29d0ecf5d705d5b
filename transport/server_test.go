package transport

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/memnode"
	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// newMemNode is a one-node cluster member over a real FSM (see
// memnode.Node): the production Service, with Raft replaced by an
// apply on the caller's goroutine.
func newMemNode(t testing.TB, leader bool, scfg service.ServiceConfig) *memnode.Node {
	t.Helper()
	n, err := memnode.New(t.TempDir(), leader, scfg)
	if err != nil {
		t.Fatalf("mem node: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close mem node: %v", err)
		}
	})
	return n
}

// testServer is a Server on a loopback listener with a client to it.
type testServer struct {
	srv  *Server
	node *memnode.Node
	addr string
	cc   *grpc.ClientConn
	q    pb.QueueClient
	c    pb.ClusterClient
}

// mustServe serves node on 127.0.0.1:0. A leader's LeaderGRPCAddr is its
// own address; a follower's is leaderAddr.
func mustServe(t testing.TB, node *memnode.Node, leaderAddr string, cfg Config) *testServer {
	t.Helper()
	srv, addr := serve(t, node, leaderAddr, cfg)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return &testServer{srv: srv, node: node, addr: addr, cc: cc, q: pb.NewQueueClient(cc), c: pb.NewClusterClient(cc)}
}

// servedNode is what serve needs of a node: a member that hands out its
// Service, and MemNode's leader address knob.
type servedNode interface {
	ServiceNode
	IsLeader() bool
	SetLeaderAddr(string)
}

// The server runs over the real node and over the test stand-in alike.
var (
	_ Node        = (*cluster.Node)(nil)
	_ ServiceNode = (*memnode.Node)(nil)
)

// serve runs a Server for node on 127.0.0.1:0 until the test ends. A
// leader's LeaderGRPCAddr is its own address; a follower's is leaderAddr.
func serve(t testing.TB, node servedNode, leaderAddr string, cfg Config) (*Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := lis.Addr().String()
	if node.IsLeader() {
		leaderAddr = addr
	}
	node.SetLeaderAddr(leaderAddr)
	srv := NewServer(node, cfg)
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
	return srv, addr
}

func mustLeader(t *testing.T, cfg Config) *testServer {
	return mustServe(t, newMemNode(t, true, service.ServiceConfig{}), "", cfg)
}

// mustLeaderWith is mustLeader with the node's service tuned.
func mustLeaderWith(t *testing.T, cfg Config, scfg service.ServiceConfig) *testServer {
	return mustServe(t, newMemNode(t, true, scfg), "", cfg)
}

func mustFollower(t *testing.T, leaderAddr string, cfg Config) *testServer {
	return mustServe(t, newMemNode(t, false, service.ServiceConfig{}), leaderAddr, cfg)
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
