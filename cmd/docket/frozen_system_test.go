//go:build system

package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_System_KeepalivePingsArePermitted: a connection with the Go
// client's keepalive (a ping every 10 s, also while idle) stays up for
// longer than three pings. gRPC's default enforcement policy counts such
// pings as strikes and closes the connection (GOAWAY too_many_pings) at
// the third.
func Test_System_KeepalivePingsArePermitted(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	cc, err := grpc.NewClient(nodes[0].grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: client.DefaultKeepaliveTime, Timeout: client.DefaultKeepaliveTimeout, PermitWithoutStream: true,
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := ctxT(t, 10*time.Second)
	if _, err := pb.NewClusterClient(cc).Status(ctx, &pb.StatusRequest{}); err != nil {
		t.Fatal(err)
	}
	if s := cc.GetState(); s != connectivity.Ready {
		t.Fatalf("state %v", s)
	}
	idle := 3*client.DefaultKeepaliveTime + 5*time.Second
	wctx, cancel := context.WithTimeout(context.Background(), idle)
	defer cancel()
	if cc.WaitForStateChange(wctx, connectivity.Ready) {
		t.Fatalf("an idle connection left READY (now %v) within %v of keepalive pings: the server refused them", cc.GetState(), idle)
	}
}

// Test_System_LongPollOnFrozenLeaderEndsByKeepalive: a Claim long-polling
// 30 s on a leader that freezes learns of it from keepalive (about 15 s),
// not at the end of its wait plus the attempt timeout, and goes on to
// claim from the new leader.
func Test_System_LongPollOnFrozenLeaderEndsByKeepalive(t *testing.T) {
	nodes, proxies := startProxiedCluster(t, 3)
	leader := waitLeader(t, nodes)
	c := mustClient(t, addrsOf(nodes)...)
	if _, err := c.Stats(ctxT(t, 5*time.Second), "", ""); err != nil {
		t.Fatal(err)
	}
	var lp *freezeProxy
	for i, n := range nodes {
		if n == leader {
			lp = proxies[i]
		}
	}
	before := lp.moved.Load()
	type result struct {
		tasks []*pb.Task
		err   error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		tasks, err := c.Claim(ctx, &pb.ClaimRequest{Queue: "poll", WorkerId: "w", MaxTasks: 1, WaitNs: int64(client.MaxWait)})
		done <- result{tasks, err}
	}()
	// The Claim's request has passed the proxy once bytes moved: the
	// server sends nothing back until the poll ends.
	testwait.For(t, 5*time.Second, "the long-poll to reach the leader", func() bool { return lp.moved.Load() > before })
	lp.freeze()
	start := time.Now()
	leader.crash()
	if _, err := c.EnqueueOne(ctxT(t, 10*time.Second), "poll", []byte("work")); err != nil {
		t.Fatal(err)
	}
	r := <-done
	took := time.Since(start)
	if r.err != nil || len(r.tasks) != 1 {
		t.Fatalf("claim = %v, %v after %v", r.tasks, r.err, took)
	}
	if limit := client.DefaultKeepaliveTime + client.DefaultKeepaliveTimeout + 3*time.Second; took > limit {
		t.Fatalf("the long-poll noticed the frozen leader after %v, more than %v", took, limit)
	}
	t.Logf("long-poll claimed from the new leader %v after the freeze", took.Round(time.Millisecond))
}
