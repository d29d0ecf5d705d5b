//go:build system

package transport

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// A client that pings every 10 s on an idle connection, as the Go client
// does by default, keeps its connection: the server's enforcement allows
// it. Under gRPC's default policy (no pings without calls in flight), which
// the server had before, the same client is sent GOAWAY (too_many_pings) on
// its third ping and its connection drops; the control shows that this test
// would see it.
func Test_System_KeepalivePingsEvery10sAllowedWhileIdle(t *testing.T) {
	const idle = 40 * time.Second // four pings; the third strikes out under gRPC's defaults
	ours := mustLeader(t, Config{})
	control := mustLeader(t, Config{ServerOptions: []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{}), // gRPC's defaults
	}})

	// watch holds an idle, pinging connection to addr and reports every
	// state it moved to.
	watch := func(addr string) <-chan []connectivity.State {
		out := make(chan []connectivity.State, 1)
		go func() {
			var changes []connectivity.State
			defer func() { out <- changes }()
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}))
			if err != nil {
				t.Error(err)
				return
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), idle)
			defer cancel()
			if _, err := pb.NewClusterClient(cc).Status(ctx, &pb.StatusRequest{}); err != nil {
				t.Errorf("status on %s: %v", addr, err)
				return
			}
			for st := cc.GetState(); cc.WaitForStateChange(ctx, st); st = cc.GetState() {
				changes = append(changes, cc.GetState())
			}
		}()
		return out
	}
	oursCh, controlCh := watch(ours.addr), watch(control.addr)
	if changes := <-oursCh; len(changes) > 0 {
		t.Errorf("an idle connection pinging every 10 s left READY: %v", changes)
	}
	if changes := <-controlCh; len(changes) == 0 {
		t.Errorf("control: gRPC's default policy kept the pinging connection READY; the test cannot tell")
	}
}
