package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/cluster/service"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_TopKeyGaugesRankKeys: a keyed queue's top keys are exported by
// rank, at most five, with no key label, whatever the number of keys; an
// unkeyed queue exports none. It needs the FSM's fair-queue rules.
func Test_TopKeyGaugesRankKeys(t *testing.T) {
	cfg := nodetest.Config(t, "n1", 1)
	reg := prometheus.NewRegistry()
	cfg.Service.Registerer = reg
	n := nodetest.Start(t, cfg)
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	nodetest.WaitLevel(t, fsm.LevelFairQueues, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	two, fair := uint32(2), pb.QueueOrder_QUEUE_ORDER_FAIR
	nodetest.MustApply(t, ctx, n, service.QueueLimitsCommand(&pb.SetQueueLimitsRequest{Queue: "k", MaxRunningPerKey: &two, Order: &fair}))
	var tasks []*pb.NewTask
	for range 6 {
		tasks = append(tasks, &pb.NewTask{Queue: "k", Tenant: pb.DefaultTenant, Key: []byte("noisy")})
	}
	for i := range 7 {
		tasks = append(tasks, &pb.NewTask{Queue: "k", Tenant: pb.DefaultTenant, Key: fmt.Appendf(nil, "quiet-%d", i)})
	}
	nodetest.MustApply(t, ctx, n, service.EnqueueCommand(&pb.EnqueueRequest{Tasks: tasks}))
	nodetest.EnqueueN(t, ctx, n, "plain", 3)
	if v, ok := nodetest.MetricValue(t, reg, "docket_queue_top_key_pending", "queue=k", "tenant=default", "rank=1"); !ok || v != 6 {
		t.Fatalf("rank 1 pending %v (%v), want 6", v, ok)
	}
	for rank, want := range map[string]bool{"2": true, "5": true, "6": false} {
		if _, ok := nodetest.MetricValue(t, reg, "docket_queue_top_key_pending", "queue=k", "rank="+rank); ok != want {
			t.Errorf("rank %s exported %v, want %v", rank, ok, want)
		}
	}
	if v, ok := nodetest.MetricValue(t, reg, "docket_queue_active_keys", "queue=k"); !ok || v != 8 {
		t.Fatalf("active keys %v (%v), want 8", v, ok)
	}
	assertNoKeyLabel(t, reg)
	if _, ok := nodetest.MetricValue(t, reg, "docket_queue_top_key_pending", "queue=plain"); ok {
		t.Fatal("an unkeyed queue exported top keys")
	}
}

// Test_TopKeyGaugesBoundedWithoutKeyedQueues: a leader with only unkeyed
// queues exports no top-key series, only the dropped count, 0.
func Test_TopKeyGaugesBoundedWithoutKeyedQueues(t *testing.T) {
	cfg := nodetest.Config(t, "n1", 1)
	reg := prometheus.NewRegistry()
	cfg.Service.Registerer = reg
	n := nodetest.Start(t, cfg)
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nodetest.EnqueueN(t, ctx, n, "plain", 3)
	if v, ok := nodetest.MetricValue(t, reg, "docket_queue_top_key_queues_dropped"); !ok || v != 0 {
		t.Fatalf("dropped %v (%v), want 0 on the leader", v, ok)
	}
	for _, name := range []string{"docket_queue_top_key_pending", "docket_queue_top_key_running", "docket_queue_active_keys"} {
		if _, ok := nodetest.MetricValue(t, reg, name); ok {
			t.Errorf("%s exported without a keyed queue", name)
		}
	}
	assertNoKeyLabel(t, reg)
}

// assertNoKeyLabel fails when any series of reg is labelled by key: the
// cardinality bound of the fair queues' metrics.
func assertNoKeyLabel(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "key" {
					t.Fatalf("%s has a key label", f.GetName())
				}
			}
		}
	}
}
