package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/cluster/check"
	"github.com/dockethq/docket/cluster/internal/nodetest"
	"github.com/dockethq/docket/fsm"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// histCount is how many observations a histogram series holds; 0 when it
// has none.
func histCount(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	_, m := nodetest.Series(t, reg, name, labels...)
	return float64(m.GetHistogram().GetSampleCount())
}

// Test_MetricsMoveByExactlyTheRightAmount is the metrics test: it
// drives enqueues, claims, an expired lease, a stale submit and a dead
// letter on a 3-node cluster, and checks each metric: the replicated
// ones on every node, the leader-local ones on the leader alone.
func Test_MetricsMoveByExactlyTheRightAmount(t *testing.T) {
	regs := map[*cluster.Node]*prometheus.Registry{}
	cfgFor := func(id string, expect int) cluster.Config {
		c := nodetest.Config(t, id, expect)
		c.Service.Registerer = prometheus.NewRegistry()
		return c
	}
	first := cfgFor("n1", 1)
	n1 := nodetest.Start(t, first)
	regs[n1] = first.Service.Registerer.(*prometheus.Registry)
	testwait.For(t, 5*time.Second, "n1 leader", n1.IsLeader)
	testwait.For(t, 5*time.Second, "the counters' level latched", func() bool { return n1.FSM().EnabledLevel() >= fsm.LevelCounters })
	nodes := []*cluster.Node{n1}
	for _, id := range []string{"n2", "n3"} {
		c := cfgFor(id, 0)
		c.Join = []string{n1.GossipAddr()}
		n := nodetest.Start(t, c)
		regs[n] = c.Service.Registerer.(*prometheus.Registry)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := n1.AddServer(ctx, id, n.Internals().Config.RaftAddr, "", false)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := nodetest.LeaderOf(t, nodes)
	must := func(cmd *pb.Command) *pb.CommandResult {
		t.Helper()
		res, err := l.Service().Propose(ctx, cmd)
		if err == nil {
			err = pb.ResultError(res)
		}
		if err != nil {
			t.Fatalf("%v: %v", cmd.GetType(), err)
		}
		return res
	}
	task := func(max uint32) *pb.NewTask {
		return &pb.NewTask{Queue: "m", Tenant: "default", Payload: []byte("x"), MaxAttempts: max}
	}
	must(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE, Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{
		Tasks: []*pb.NewTask{task(0), task(1), task(0)}}}})
	claim := func(n uint32, lease time.Duration) []*pb.Task {
		return must(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_CLAIM, Body: &pb.Command_Claim{Claim: &pb.ClaimCmd{
			Queue: "m", Tenant: "default", WorkerId: "w", LeaseNs: int64(lease), MaxTasks: n}}}).GetTasks()
	}
	held := claim(2, time.Hour) // FIFO: the first two enqueued
	if len(held) != 2 || held[1].GetMaxAttempts() != 1 {
		t.Fatalf("claimed %v", held)
	}
	done, dies := held[0], held[1]
	if expires := claim(1, time.Second); len(expires) != 1 {
		t.Fatalf("short claim got %d tasks", len(expires))
	}
	submit := func(tk *pb.Task, fence uint64) *pb.Command {
		return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SUBMIT, Body: &pb.Command_Submit{Submit: &pb.SubmitCmd{
			TaskId: tk.GetId(), Fence: fence, Outcome: pb.Outcome_OUTCOME_COMPLETED}}}
	}
	must(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_HEARTBEAT, Body: &pb.Command_Heartbeat{Heartbeat: &pb.HeartbeatCmd{
		Items: []*pb.HeartbeatItem{{TaskId: done.GetId(), Fence: done.GetFence(), LeaseNs: int64(time.Hour)}}}}})
	must(submit(done, done.GetFence())) // completed
	if code := must(submit(dies, dies.GetFence()+1)).GetItems()[0].GetCode(); code != pb.Code_CODE_STALE_FENCE {
		t.Fatalf("forged fence answered %v", code)
	}
	must(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_NACK, Body: &pb.Command_Nack{Nack: &pb.NackCmd{ // dead letter
		TaskId: dies.GetId(), Fence: dies.GetFence(), Reason: "boom"}}})
	// The leader's reaper requeues the short claim once its lease ran out.
	testwait.For(t, 10*time.Second, "the reaper to expire the lease", func() bool { return nodetest.PendingOn(t, l, "m") == 1 })

	last := l.FSM().AppliedIndex()
	testwait.For(t, 5*time.Second, "every node to apply", func() bool {
		for _, n := range nodes {
			if n.FSM().AppliedIndex() < last {
				return false
			}
		}
		return true
	})
	replicated := map[string]float64{
		"docket_queue_enqueued_total": 3, "docket_queue_claimed_total": 3, "docket_queue_completed_total": 1,
		"docket_queue_failed_total": 0, "docket_queue_dead_lettered_total": 1, "docket_queue_lease_expired_total": 1,
		"docket_queue_requeued_total": 1, "docket_queue_cancelled_total": 0,
	}
	states := map[string]float64{"pending": 1, "running": 0, "dead": 1, "finished": 1, "delayed": 0}
	for _, n := range nodes {
		reg := regs[n]
		for name, want := range replicated {
			if got, ok := nodetest.MetricValue(t, reg, name, "queue=m", "tenant=default"); !ok || got != want {
				t.Errorf("%s: %s = %v (present %v), want %v", n.ID(), name, got, ok, want)
			}
		}
		for state, want := range states {
			if got, _ := nodetest.MetricValue(t, reg, "docket_queue_tasks", "queue=m", "tenant=default", "state="+state); got != want {
				t.Errorf("%s: docket_queue_tasks{state=%s} = %v, want %v", n.ID(), state, got, want)
			}
		}
		if got, ok := nodetest.MetricValue(t, reg, "docket_lease_expirations_total", "reason=expired"); !ok || got != 1 {
			t.Errorf("%s: lease_expirations_total{expired} = %v (present %v), want 1", n.ID(), got, ok)
		}
		if got, ok := nodetest.MetricValue(t, reg, "docket_queue_oldest_pending_age_seconds", "queue=m"); !ok || got < 0 {
			t.Errorf("%s: oldest pending age %v (present %v)", n.ID(), got, ok)
		}
		if got, _ := nodetest.MetricValue(t, reg, "docket_fsm_applied_index"); got < float64(last) {
			t.Errorf("%s: fsm applied index %v, want at least %d", n.ID(), got, last)
		}
		if got, _ := nodetest.MetricValue(t, reg, "docket_raft_voters"); got != 3 {
			t.Errorf("%s: voters %v", n.ID(), got)
		}
		testwait.For(t, 10*time.Second, n.ID()+"'s gossip to see every voter alive", func() bool {
			got, _ := nodetest.MetricValue(t, reg, "docket_raft_failure_tolerance")
			return got == 1
		})
		if got, _ := nodetest.MetricValue(t, reg, "docket_raft_state", "state=Leader"); got != b2f(n == l) {
			t.Errorf("%s: raft_state{Leader} %v", n.ID(), got)
		}
		if got, _ := nodetest.MetricValue(t, reg, "docket_pebble_disk_bytes"); got <= 0 {
			t.Errorf("%s: pebble disk bytes %v", n.ID(), got)
		}
		if got, ok := nodetest.MetricValue(t, reg, "docket_health_serving"); !ok || got != 1 {
			t.Errorf("%s: health_serving %v (present %v)", n.ID(), got, ok)
		}
		// A diverged node is NOT_SERVING in its gRPC health, and the gauge
		// says the same (it stayed 1 on a DIVERGED node).
		restore := n.Internals().Checker.Override(check.StateDiverged)
		if got, _ := nodetest.MetricValue(t, reg, "docket_health_serving"); got != 0 {
			t.Errorf("%s: health_serving %v while diverged, want 0", n.ID(), got)
		}
		restore()
		// Leader-local: only the node that proposed saw the answers.
		wantLocal := b2f(n == l)
		if got, _ := nodetest.MetricValue(t, reg, "docket_lease_stale_fence_total", "command=SUBMIT"); got != wantLocal {
			t.Errorf("%s: stale_fence_total{SUBMIT} = %v, want %v", n.ID(), got, wantLocal)
		}
		if got, _ := nodetest.MetricValue(t, reg, "docket_lease_heartbeats_total"); got != wantLocal {
			t.Errorf("%s: heartbeats_total = %v, want %v", n.ID(), got, wantLocal)
		}
		for _, h := range []struct {
			name   string
			labels []string
		}{{"docket_lease_claim_to_answer_seconds", []string{"outcome=completed"}}, {"docket_lease_claim_to_answer_seconds", []string{"outcome=nack"}},
			{"docket_lease_renewal_gap_seconds", nil}} {
			if got := histCount(t, reg, h.name, h.labels...); got != wantLocal {
				t.Errorf("%s: %s%v observed %v times, want %v", n.ID(), h.name, h.labels, got, wantLocal)
			}
		}
	}
}

// Test_LeaseExpirationsByReason: docket_lease_expirations_total counts a
// lease the reaper expired as "expired" and a claim put back after its
// answer was lost as "released", from the replicated totals, once the
// cluster latched LevelAttempts.
func Test_LeaseExpirationsByReason(t *testing.T) {
	cfg := nodetest.Config(t, "n1", 1)
	reg := prometheus.NewRegistry()
	cfg.Service.Registerer = reg
	n := nodetest.Start(t, cfg)
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	testwait.For(t, 5*time.Second, "the attempts level latched", func() bool { return n.FSM().EnabledLevel() >= fsm.LevelAttempts })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	must := func(cmd *pb.Command) *pb.CommandResult {
		t.Helper()
		res, err := n.Service().Propose(ctx, cmd)
		if err == nil {
			err = pb.ResultError(res)
		}
		if err != nil {
			t.Fatalf("%v: %v", cmd.GetType(), err)
		}
		return res
	}
	must(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE, Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{
		Tasks: []*pb.NewTask{{Queue: "x", Tenant: "default"}, {Queue: "y", Tenant: "default"}}}}})
	claim := func(q string, lease time.Duration) *pb.Task {
		t.Helper()
		tasks := must(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_CLAIM, Body: &pb.Command_Claim{Claim: &pb.ClaimCmd{
			Queue: q, Tenant: "default", WorkerId: "w", LeaseNs: int64(lease), MaxTasks: 1}}}).GetTasks()
		if len(tasks) != 1 {
			t.Fatalf("claim %s: %d tasks", q, len(tasks))
		}
		return tasks[0]
	}
	claim("x", time.Second)
	n.Service().ReleaseTasks([]*pb.Task{claim("y", time.Hour)})
	testwait.For(t, 10*time.Second, "the reaper and the release", func() bool { return nodetest.PendingOn(t, n, "x") == 1 && nodetest.PendingOn(t, n, "y") == 1 })
	for reason, want := range map[string]float64{"expired": 1, "released": 1} {
		if got, ok := nodetest.MetricValue(t, reg, "docket_lease_expirations_total", "reason="+reason); !ok || got != want {
			t.Errorf("lease_expirations_total{%s} = %v (present %v), want %v", reason, got, ok, want)
		}
	}
	f, _ := nodetest.Series(t, reg, "docket_lease_expirations_total", "reason=released")
	if f == nil || !strings.Contains(f.GetHelp(), "Replicated") {
		t.Errorf("help text does not say the counter is replicated: %q", f.GetHelp())
	}
}

// Test_MetricsExistAtZeroOnAFreshNode: a node exports every counter whose
// label values are known in advance from its start, at 0, before any
// event and whether or not it ever leads, so that rate() and the alerts
// see them. docket_lease_stale_fence_total (which the shipped dashboard
// graphs) existed only after the first stale fence, and only on the
// leader.
func Test_MetricsExistAtZeroOnAFreshNode(t *testing.T) {
	cfg := nodetest.Config(t, "n1", 1)
	reg := prometheus.NewRegistry()
	cfg.Service.Registerer = reg
	nodetest.Start(t, cfg) // scraped at once: no leader yet, nothing applied
	zero := func(name string, labels ...string) {
		t.Helper()
		if got, ok := nodetest.MetricValue(t, reg, name, labels...); !ok || got != 0 {
			t.Errorf("%s%v = %v (present %v), want 0 from the start", name, labels, got, ok)
		}
	}
	for _, cmd := range []string{"HEARTBEAT", "SUBMIT", "NACK", "SNOOZE", "REAP", "RELEASE", "TIME_OUT"} {
		zero("docket_lease_stale_fence_total", "command="+cmd)
	}
	zero("docket_lease_heartbeats_total")
	zero("docket_cluster_claim_undelivered_tasks_total")
	zero("docket_cluster_claim_released_tasks_total")
	zero("docket_lease_expirations_total", "reason=expired")
	zero("docket_lease_expirations_total", "reason=released")
	for _, outcome := range []string{"completed", "failed", "nack"} {
		if _, m := nodetest.Series(t, reg, "docket_lease_claim_to_answer_seconds", "outcome="+outcome); m == nil || m.GetHistogram().GetSampleCount() != 0 {
			t.Errorf("docket_lease_claim_to_answer_seconds{outcome=%s} = %v, want present and empty", outcome, m)
		}
	}
}

// Test_QueueControlGauges: docket_queue_tasks counts the tasks waiting on
// their parents, and the queues' pause flags, limits and the tenants'
// schedules have gauges, on every node's replica alike.
func Test_QueueControlGauges(t *testing.T) {
	cfg := nodetest.Config(t, "n1", 1)
	reg := prometheus.NewRegistry()
	cfg.Service.Registerer = reg
	n := nodetest.Start(t, cfg)
	testwait.For(t, 5*time.Second, "n1 leader", n.IsLeader)
	testwait.For(t, 5*time.Second, "the dependencies level latched", func() bool { return n.FSM().EnabledLevel() >= fsm.LevelRetries })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	must := func(cmd *pb.Command) {
		t.Helper()
		res, err := n.Service().Propose(ctx, cmd)
		if err == nil {
			err = pb.ResultError(res)
		}
		for _, it := range res.GetItems() {
			if err == nil {
				err = pb.ItemError(it)
			}
		}
		if err != nil {
			t.Fatalf("%v: %v", cmd.GetType(), err)
		}
	}
	// One parent, four children waiting on it; one more queue left alone.
	tasks := []*pb.NewTask{{Queue: "m", Tenant: "default"}}
	for range 4 {
		tasks = append(tasks, &pb.NewTask{Queue: "m", Tenant: "default", AfterIndex: []uint32{0}})
	}
	tasks = append(tasks, &pb.NewTask{Queue: "other", Tenant: "default"})
	must(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_ENQUEUE, Body: &pb.Command_Enqueue{Enqueue: &pb.EnqueueCmd{Tasks: tasks}}})
	must(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_PAUSED, Body: &pb.Command_SetQueuePaused{
		SetQueuePaused: &pb.SetQueuePausedCmd{Queue: "m", Tenant: "default", Paused: true}}})
	maxRunning, rate, burst, tenantMax := uint32(3), uint64(2500), uint32(5), uint32(7)
	must(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS, Body: &pb.Command_SetQueueLimits{
		SetQueueLimits: &pb.SetQueueLimitsCmd{Queue: "m", Tenant: "default", MaxRunning: &maxRunning, RateMilli: &rate, Burst: &burst}}})
	must(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS, Body: &pb.Command_SetQueueLimits{
		SetQueueLimits: &pb.SetQueueLimitsCmd{Tenant: "default", MaxRunning: &tenantMax}}})
	for _, name := range []string{"hourly", "daily"} {
		must(&pb.Command{Type: pb.CommandType_COMMAND_TYPE_PUT_SCHEDULE, Body: &pb.Command_PutSchedule{PutSchedule: &pb.PutScheduleCmd{
			Schedule: &pb.Schedule{Name: name, Tenant: "default", Queue: "m", Spec: "@hourly"}}}})
	}
	want := []struct {
		name   string
		labels []string
		value  float64
	}{
		{"docket_queue_tasks", []string{"queue=m", "tenant=default", "state=waiting"}, 4},
		{"docket_queue_tasks", []string{"queue=m", "tenant=default", "state=pending"}, 1},
		{"docket_queue_tasks", []string{"queue=other", "tenant=default", "state=waiting"}, 0},
		{"docket_queue_paused", []string{"queue=m", "tenant=default"}, 1},
		{"docket_queue_paused", []string{"queue=other", "tenant=default"}, 0},
		{"docket_queue_limit", []string{"queue=m", "tenant=default", "kind=max_running"}, 3},
		{"docket_queue_limit", []string{"queue=m", "tenant=default", "kind=rate_per_second"}, 2.5},
		{"docket_queue_limit", []string{"queue=m", "tenant=default", "kind=burst"}, 5},
		{"docket_tenant_limit", []string{"tenant=default", "kind=max_running"}, 7},
		{"docket_schedules", []string{"tenant=default"}, 2},
	}
	for _, w := range want {
		if got, ok := nodetest.MetricValue(t, reg, w.name, w.labels...); !ok || got != w.value {
			t.Errorf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.value)
		}
	}
	// A limit not set is absent, not 0: 0 would read as "nothing may run".
	if _, ok := nodetest.MetricValue(t, reg, "docket_queue_limit", "queue=other"); ok {
		t.Errorf("docket_queue_limit exported for a queue without limits")
	}
}

// b2f is a gauge's value of a truth.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
