package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/client"
	"github.com/dockethq/docket/cluster"
	"github.com/dockethq/docket/internal/testwait"
	pb "github.com/dockethq/docket/proto/docketv1"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Tasks enqueued through one follower are claimed and submitted through
// another; every node ends with the same keyspace.
func Test_Cluster_ConvergenceThroughFollowers(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	fs := followers(nodes, leader)
	ctx := ctxT(t, 20*time.Second)
	in, out := rawQueue(t, fs[0].grpcAddr), rawQueue(t, fs[1].grpcAddr)

	var tasks []*pb.NewTask
	for i := 0; i < 20; i++ {
		tasks = append(tasks, &pb.NewTask{Queue: "conv", Payload: []byte(fmt.Sprint(i)), IdempotencyKey: fmt.Sprint("k", i)})
	}
	enq, err := in.Enqueue(ctx, &pb.EnqueueRequest{Tasks: tasks})
	if err != nil {
		t.Fatalf("enqueue via follower %s: %v", fs[0].id, err)
	}
	if len(enq.GetItems()) != 20 {
		t.Fatalf("enqueue answered %d items", len(enq.GetItems()))
	}
	done := 0
	for done < 20 {
		cl, err := out.Claim(ctx, &pb.ClaimRequest{Queue: "conv", WorkerId: "w", LeaseNs: int64(30 * time.Second), MaxTasks: 7})
		if err != nil {
			t.Fatalf("claim via follower %s: %v", fs[1].id, err)
		}
		for _, task := range cl.GetTasks() {
			if _, err := out.Submit(ctx, &pb.SubmitRequest{TaskId: task.GetId(), Fence: task.GetFence(),
				Outcome: pb.Outcome_OUTCOME_COMPLETED, Result: task.GetPayload()}); err != nil {
				t.Fatalf("submit %s: %v", task.GetId(), err)
			}
			done++
		}
	}
	waitConverged(t, nodes)
	// The same check as an operator (or the chaos harness) makes it, over gRPC.
	// Each status is read at its node's own applied index, and entries
	// (checks, the feature latch) may land between two reads: the reports
	// agree once no entry fell between them, which a divergence never does.
	c := mustClient(t, addrsOf(nodes)...)
	testwait.Until(t, 10*time.Second, "every node to report the same hash", func() string {
		var hash string
		for _, n := range nodes {
			ns, err := c.NodeStatus(ctx, n.grpcAddr, true)
			if err != nil {
				t.Fatalf("status of %s: %v", n.id, err)
			}
			if ns.GetKeyspaceHash() == "" || (hash != "" && ns.GetKeyspaceHash() != hash) {
				return fmt.Sprintf("%s reports hash %q, others %q", n.id, ns.GetKeyspaceHash(), hash)
			}
			hash = ns.GetKeyspaceHash()
		}
		return ""
	})
	st, err := rawQueue(t, fs[0].grpcAddr).Stats(ctx, &pb.StatsRequest{Queue: "conv"})
	if err != nil {
		t.Fatal(err)
	}
	if s := st.GetQueues()[0]; s.GetCompleted() != 20 || s.GetPending() != 0 || s.GetRunning() != 0 {
		t.Fatalf("stats after drain: %v", s)
	}
}

// The leader is stopped without a transfer while producers enqueue. Every
// acknowledged task is there afterwards, none twice, and callers saw no
// error inside their deadline.
func Test_Cluster_LeaderCrashUnderLoad(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	c := mustClient(t, addrsOf(nodes)...)

	const producers, perProducer = 8, 60
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		errs  []error
		wg    sync.WaitGroup
	)
	crashAt := make(chan struct{})
	var once sync.Once
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < perProducer; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				id, err := c.EnqueueOne(ctx, "load", []byte(fmt.Sprintf("%d-%d", p, i)))
				cancel()
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("producer %d op %d: %w", p, i, err))
				} else if acked[id] {
					errs = append(errs, fmt.Errorf("id %s acknowledged twice", id))
				} else {
					acked[id] = true
				}
				n := len(acked)
				mu.Unlock()
				if n == producers*perProducer/3 {
					once.Do(func() { close(crashAt) })
				}
			}
		}(p)
	}
	<-crashAt
	crashed := time.Now()
	leader.crash()
	wg.Wait()
	t.Logf("crashed leader %s after %d acks; load finished %v later", leader.id, producers*perProducer/3, time.Since(crashed).Round(time.Millisecond))
	if len(errs) > 0 {
		t.Fatalf("%d callers saw errors, first: %v", len(errs), errs[0])
	}
	if len(acked) != producers*perProducer {
		t.Fatalf("acked %d of %d", len(acked), producers*perProducer)
	}
	ctx := ctxT(t, 20*time.Second)
	for id := range acked {
		task, err := c.ReadTask(ctx, id)
		if err != nil {
			t.Fatalf("acked task %s after failover: %v", id, err)
		}
		if task.GetState() != pb.TaskState_TASK_STATE_PENDING {
			t.Fatalf("task %s in %v", id, task.GetState())
		}
	}
	stats, err := c.Stats(ctx, "load", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := stats[0].GetPending(); got != uint64(len(acked)) {
		t.Fatalf("queue holds %d tasks, %d acknowledged: duplicates or losses", got, len(acked))
	}
	waitConverged(t, nodes)
}

// A worker that stops heartbeating loses its task to the reaper; the next
// claim gets a larger fence and the old worker's Submit is refused.
func Test_Cluster_ExpiredLeaseIsReapedAndOldSubmitIsStale(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	c := mustClient(t, addrsOf(nodes)...)
	ctx := ctxT(t, 20*time.Second)
	id, err := c.EnqueueOne(ctx, "lease", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Claim(ctx, &pb.ClaimRequest{Queue: "lease", WorkerId: "slow", LeaseNs: int64(time.Second)})
	if err != nil || len(first) != 1 || first[0].GetId() != id {
		t.Fatalf("first claim: %v %v", first, err)
	}
	second, err := c.Claim(ctx, &pb.ClaimRequest{Queue: "lease", WorkerId: "fast", LeaseNs: int64(10 * time.Second),
		WaitNs: int64(10 * time.Second)})
	if err != nil || len(second) != 1 || second[0].GetId() != id {
		t.Fatalf("re-claim after expiry: %v %v", second, err)
	}
	if second[0].GetFence() <= first[0].GetFence() {
		t.Fatalf("fence went from %d to %d", first[0].GetFence(), second[0].GetFence())
	}
	if second[0].GetAttempts() != 1 {
		t.Fatalf("attempts %d after one reap", second[0].GetAttempts())
	}
	_, err = c.Submit(ctx, &pb.SubmitRequest{TaskId: id, Fence: first[0].GetFence(), Outcome: pb.Outcome_OUTCOME_COMPLETED})
	if !errors.Is(err, client.ErrStaleFence) {
		t.Fatalf("old worker's submit: %v, want stale fence", err)
	}
	if _, err := c.Submit(ctx, &pb.SubmitRequest{TaskId: id, Fence: second[0].GetFence(), Outcome: pb.Outcome_OUTCOME_COMPLETED}); err != nil {
		t.Fatalf("new worker's submit: %v", err)
	}
}

// A worker that heartbeats on time keeps its lease across a leader crash.
func Test_Cluster_HeartbeatKeepsLeaseAcrossLeaderChange(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	c := mustClient(t, addrsOf(nodes)...)
	ctx := ctxT(t, 30*time.Second)
	id, err := c.EnqueueOne(ctx, "hb", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	const lease = 2 * time.Second
	got, err := c.Claim(ctx, &pb.ClaimRequest{Queue: "hb", WorkerId: "w", LeaseNs: int64(lease)})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %v", got, err)
	}
	fence := got[0].GetFence()

	stop := make(chan struct{})
	hbErr := make(chan error, 1)
	go func() {
		tick := time.NewTicker(lease / 4)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				hbErr <- nil
				return
			case <-tick.C:
			}
			hctx, cancel := context.WithTimeout(ctx, lease/2)
			res, err := c.Heartbeat(hctx, &pb.HeartbeatItem{TaskId: id, Fence: fence})
			cancel()
			if err == nil && res[0].GetCode() != pb.Code_CODE_OK {
				err = fmt.Errorf("heartbeat answered %v", res[0])
			}
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				hbErr <- err
				return
			}
		}
	}()
	leader.crash()
	newLeader := waitLeader(t, nodes)
	// Hold on past several lease lengths and the new leader's reap grace.
	select {
	case err := <-hbErr:
		t.Fatalf("heartbeat failed: %v", err)
	case <-time.After(3 * lease):
	}
	close(stop)
	if err := <-hbErr; err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	task, err := c.ReadTask(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if task.GetState() != pb.TaskState_TASK_STATE_RUNNING || task.GetFence() != fence {
		t.Fatalf("after leader change %s -> %s the task is %v under fence %d, want running under %d",
			leader.id, newLeader.id, task.GetState(), task.GetFence(), fence)
	}
	if _, err := c.Submit(ctx, &pb.SubmitRequest{TaskId: id, Fence: fence, Outcome: pb.Outcome_OUTCOME_COMPLETED}); err != nil {
		t.Fatalf("submit with the original fence: %v", err)
	}
}

// Every node stops and restarts from its data dir: all state is back and
// no entry was applied twice (attempt and claim counters unchanged).
func Test_Cluster_FullRestart(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	c := mustClient(t, addrsOf(nodes)...)
	ctx := ctxT(t, 30*time.Second)
	var ids []string
	for i := 0; i < 30; i++ {
		id, err := c.EnqueueOne(ctx, "restart", []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	claimed, err := c.Claim(ctx, &pb.ClaimRequest{Queue: "restart", WorkerId: "w", LeaseNs: int64(time.Hour), MaxTasks: 10})
	if err != nil || len(claimed) != 10 {
		t.Fatalf("claim: %d %v", len(claimed), err)
	}
	for _, task := range claimed[:5] {
		if _, err := c.Nack(ctx, &pb.NackRequest{TaskId: task.GetId(), Fence: task.GetFence()}); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]*pb.Task{}
	for _, id := range ids {
		task, err := c.ReadTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = task
	}
	waitConverged(t, nodes)
	for _, n := range nodes {
		n.stop()
	}
	for _, n := range nodes {
		n.start(nil)
	}
	waitLeader(t, nodes)
	c2 := mustClient(t, addrsOf(nodes)...)
	for _, id := range ids {
		task, err := c2.ReadTask(ctx, id)
		if err != nil {
			t.Fatalf("task %s after restart: %v", id, err)
		}
		b := before[id]
		if task.GetState() != b.GetState() || task.GetAttempts() != b.GetAttempts() ||
			task.GetClaims() != b.GetClaims() || task.GetFence() != b.GetFence() {
			t.Fatalf("task %s changed across restart: before %v/%d/%d/%d after %v/%d/%d/%d", id,
				b.GetState(), b.GetAttempts(), b.GetClaims(), b.GetFence(),
				task.GetState(), task.GetAttempts(), task.GetClaims(), task.GetFence())
		}
	}
	waitConverged(t, nodes)
}

// A node that was down while the log was compacted catches up by snapshot.
func Test_Cluster_CatchUpBySnapshot(t *testing.T) {
	nodes := startCluster(t, 3, func(c *cluster.Config) {
		c.TrailingLogs = 10
		c.SnapshotThreshold = 50
	})
	leader := waitLeader(t, nodes)
	lagger := followers(nodes, leader)[0]
	lagger.stop()
	c := mustClient(t, leader.grpcAddr)
	ctx := ctxT(t, 30*time.Second)
	for i := 0; i < 100; i++ {
		if _, err := c.EnqueueOne(ctx, "snap", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if n.running {
			if err := n.node.Snapshot(); err != nil {
				t.Fatalf("%s snapshot: %v", n.id, err)
			}
		}
	}
	lagger.start(nil)
	waitConverged(t, nodes)
	snaps, err := os.ReadDir(filepath.Join(lagger.dir, "snapshots"))
	if err != nil || len(snaps) == 0 {
		t.Fatalf("%s caught up without installing a snapshot (%v)", lagger.id, err)
	}
	got, err := lagger.node.FSM().Stats("snap", "default")
	if err != nil || len(got) != 1 || got[0].GetPending() != 100 {
		t.Fatalf("%s stats after catch-up: %v %v", lagger.id, got, err)
	}
}

// Each invalid field gets InvalidArgument naming it, an oversize payload is
// refused, and nothing is stored.
func Test_Cluster_BadInputOverGRPC(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	ctx := ctxT(t, 20*time.Second)
	good := func() *pb.NewTask { return &pb.NewTask{Queue: "bad", Payload: []byte("x")} }
	cases := []struct {
		name  string
		task  func(*pb.NewTask)
		code  codes.Code
		field string
	}{
		{"queue empty", func(t *pb.NewTask) { t.Queue = "" }, codes.InvalidArgument, "tasks[0].queue"},
		{"queue slash", func(t *pb.NewTask) { t.Queue = "a/b" }, codes.InvalidArgument, "tasks[0].queue"},
		{"tenant bad", func(t *pb.NewTask) { t.Tenant = "tenant with space" }, codes.InvalidArgument, "tasks[0].tenant"},
		{"priority", func(t *pb.NewTask) { t.Priority = 10 }, codes.InvalidArgument, "tasks[0].priority"},
		{"delay", func(t *pb.NewTask) { t.DelayNs = -1 }, codes.InvalidArgument, "tasks[0].delay_ns"},
		{"max attempts", func(t *pb.NewTask) { t.MaxAttempts = 100000 }, codes.InvalidArgument, "tasks[0].max_attempts"},
		{"key", func(t *pb.NewTask) { t.IdempotencyKey = strings.Repeat("k", 300) }, codes.InvalidArgument, "tasks[0].idempotency_key"},
		{"payload", func(t *pb.NewTask) { t.Payload = make([]byte, 1<<20+1) }, codes.ResourceExhausted, "tasks[0].payload"},
	}
	for _, n := range nodes {
		q := rawQueue(t, n.grpcAddr)
		for _, tc := range cases {
			task := good()
			tc.task(task)
			_, err := q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{task}})
			st := status.Convert(err)
			if st.Code() != tc.code {
				t.Fatalf("%s via %s: code %v (%v), want %v", tc.name, n.id, st.Code(), err, tc.code)
			}
			if field := badField(st); field != tc.field {
				t.Fatalf("%s via %s: field %q, want %q", tc.name, n.id, field, tc.field)
			}
		}
		_, err := q.Claim(ctx, &pb.ClaimRequest{Queue: "bad", WorkerId: "w", LeaseNs: int64(time.Millisecond)})
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || badField(st) != "lease_ns" {
			t.Fatalf("claim with a 1ms lease via %s: %v", n.id, err)
		}
	}
	stats, err := leader.node.FSM().Stats("", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 0 {
		t.Fatalf("bad input stored something: %v", stats)
	}
}

func badField(st *status.Status) string {
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}
