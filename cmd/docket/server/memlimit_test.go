package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/transport"
)

// startLimited starts one real node (Raft, the default log store, Pebble,
// the gRPC API) bounded to limit bytes of memory, and a client of it.
func startLimited(t *testing.T, limit uint64) *client.Client {
	t.Helper()
	_, addrs := startServers(t, 1, func(cfg *cluster.Config, _ *transport.Config) { cfg.Service.MemoryLimit = limit })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, addrs, client.WithDiscoveryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantMemoryLimit checks that err is the memory refusal, as a client
// sees it: ResourceExhausted with reason MEMORY_LIMIT, and a sentence
// naming the limit and the use.
func wantMemoryLimit(t *testing.T, err error, limit string) {
	t.Helper()
	if !errors.Is(err, client.ErrMemoryLimit) || status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("enqueue at the memory limit: %v (code %v), want client.ErrMemoryLimit, ResourceExhausted", err, status.Code(err))
	}
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "--memory-limit "+limit) || !strings.Contains(msg, "it uses ") {
		t.Fatalf("refusal %q names neither the limit %s nor the use", msg, limit)
	}
}

// Test_MemoryLimitRefusesEnqueueNotClaims: a node whose memory is over
// its limit from the start refuses every Enqueue, and still answers
// claims and heartbeats, which free memory.
func Test_MemoryLimitRefusesEnqueueNotClaims(t *testing.T) {
	c := startLimited(t, 1<<20) // 1 MiB: any node is over it
	ctx := testCtx(t)
	_, err := c.EnqueueOne(ctx, "jobs", []byte("x"))
	wantMemoryLimit(t, err, "1 MiB")
	got, err := c.ClaimTasks(ctx, "jobs")
	if err != nil || len(got) != 0 {
		t.Fatalf("claim at the memory limit: %d tasks, %v; want none and no error", len(got), err)
	}
	items, err := c.Heartbeat(ctx, &pb.HeartbeatItem{TaskId: "0000000000000001-0000", Fence: 1})
	if err != nil || len(items) != 1 {
		t.Fatalf("heartbeat at the memory limit: %v, %v; want an item's answer", items, err)
	}
}

// Test_MemoryLimitFollowsUse: a node takes work below its limit, refuses
// new tasks once the process's memory reaches the mark (a ballast the
// test holds), still lets workers claim and finish what it acknowledged,
// and takes work again once memory falls. No acknowledged task is lost.
func Test_MemoryLimitFollowsUse(t *testing.T) {
	limit := service.MemoryInUse() + 256<<20 // room for the node itself
	c := startLimited(t, limit)
	ctx := testCtx(t)
	var acked []string
	for i := range 3 {
		id, err := c.EnqueueOne(ctx, "jobs", []byte(fmt.Sprint("before ", i)))
		if err != nil {
			t.Fatalf("enqueue below the limit: %v", err)
		}
		acked = append(acked, id)
	}

	refuseAt := uint64(float64(limit) * service.MemoryRefuseFraction)
	use := service.MemoryInUse()
	if use >= refuseAt {
		t.Fatalf("the node alone uses %d of a refuse mark of %d; the test needs room", use, refuseAt)
	}
	// The ballast is resident memory outside the Go heap, as Pebble's
	// block cache and memtables are: the guard sees it in the resident set.
	release := residentBallast(t, refuseAt-service.ResidentBytes()+32<<20) // use < refuseAt, and use ≥ the resident set
	var refusal error
	testwait.For(t, 10*time.Second, "enqueues to be refused at the limit", func() bool {
		id, err := c.EnqueueOne(ctx, "jobs", []byte("at the limit"))
		if err == nil {
			acked = append(acked, id) // the guard had not sampled the ballast yet
			return false
		}
		refusal = err
		return true
	})
	wantMemoryLimit(t, refusal, fmt.Sprintf("%.0f MiB", float64(limit)/(1<<20)))

	// Workers still claim and finish acknowledged tasks.
	claimed, err := c.ClaimTasks(ctx, "jobs", client.ClaimMax(2))
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim at the limit: %d tasks, %v; want 2", len(claimed), err)
	}
	for _, task := range claimed {
		if _, err := c.CompleteClaim(ctx, task, []byte("done")); err != nil {
			t.Fatalf("submit at the limit: %v", err)
		}
	}
	release()
	testwait.Until(t, 10*time.Second, "enqueues to be taken again below the limit", func() string {
		id, err := c.EnqueueOne(ctx, "jobs", []byte("after"))
		if err != nil {
			if !errors.Is(err, client.ErrMemoryLimit) {
				t.Fatalf("enqueue after the ballast went: %v", err)
			}
			return fmt.Sprintf("%v (the process uses %d MiB, resident %d MiB; refuse mark %d MiB)",
				err, service.MemoryInUse()>>20, service.ResidentBytes()>>20, refuseAt>>20)
		}
		acked = append(acked, id)
		return ""
	})
	for _, id := range acked {
		if _, err := c.Get(ctx, id); err != nil {
			t.Fatalf("acknowledged task %s: %v", id, err)
		}
	}
}

// residentBallast maps n bytes outside the Go heap and touches each page,
// so the process's resident set grows by n at once, and falls by n when
// release (or the test's end) unmaps them. A Go slice as the ballast
// failed under the race detector on a loaded machine: after the collector
// had returned it, the resident set stayed at 365 MiB, 80 MiB over the
// refuse mark, with 48 MiB of Go memory in use. The race detector does not
// track memory outside Go's heap, so no shadow of this one outlives it.
func residentBallast(t *testing.T, n uint64) (release func()) {
	t.Helper()
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("map a ballast of %d MiB: %v", n>>20, err)
	}
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 1
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if err := syscall.Munmap(b); err != nil {
				t.Errorf("unmap the ballast: %v", err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// Test_MemoryLimitWhereTheEnqueueArrivesAndOnTheLeader: in a cluster where
// only n1 is over its limit, an Enqueue sent to n1 is refused there, and
// one sent to another node is refused too exactly when n1 leads (the
// follower forwards it and the leader checks its own memory), with the
// leader's answer passed through unchanged.
func Test_MemoryLimitWhereTheEnqueueArrivesAndOnTheLeader(t *testing.T) {
	nodes, addrs := startServers(t, 3, func(cfg *cluster.Config, _ *transport.Config) {
		if cfg.ID == "n1" {
			cfg.Service.MemoryLimit = 1 << 20
		}
	})
	ctx := testCtx(t)
	leader := leaderID(nodes)
	for i, addr := range addrs {
		id := nodes[i].Node.ID()
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		// A raw stub: the Go client would follow the leader's address
		// and never ask a follower.
		_, err = pb.NewQueueClient(cc).Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "jobs", Payload: []byte(id)}}})
		refused := id == "n1" || leader == "n1"
		switch {
		case refused && (status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "--memory-limit 1 MiB")):
			t.Fatalf("enqueue sent to %s (leader %s): %v, want ResourceExhausted naming n1's limit", id, leader, err)
		case !refused && err != nil:
			t.Fatalf("enqueue sent to %s (leader %s): %v, want it taken", id, leader, err)
		}
	}
}
