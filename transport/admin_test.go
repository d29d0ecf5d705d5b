package transport

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/cluster/check"
	pb "github.com/dockethq/docket/proto/docketv1"
)

func Test_HealthAndReflection(t *testing.T) {
	leader := mustLeader(t, Config{Reflection: true})
	orphan := mustFollower(t, "", Config{})
	ctx := testCtx(t)

	for _, c := range []struct {
		ts      *testServer
		service string
		want    healthpb.HealthCheckResponse_ServingStatus
	}{
		{leader, "", healthpb.HealthCheckResponse_SERVING},
		{leader, "docket.v1.Queue", healthpb.HealthCheckResponse_SERVING},
		{leader, "docket.v1.Cluster", healthpb.HealthCheckResponse_SERVING},
		{orphan, "", healthpb.HealthCheckResponse_SERVING},
		{orphan, "docket.v1.Queue", healthpb.HealthCheckResponse_NOT_SERVING}, // no leader known
	} {
		resp, err := healthpb.NewHealthClient(c.ts.cc).Check(ctx, &healthpb.HealthCheckRequest{Service: c.service})
		if err != nil || resp.GetStatus() != c.want {
			t.Fatalf("health %q: %v, %v; want %v", c.service, resp.GetStatus(), err, c.want)
		}
	}

	stream, err := reflectionpb.NewServerReflectionClient(leader.cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatalf("reflection send: %v", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection recv: %v", err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"docket.v1.Queue", "docket.v1.Cluster", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Fatalf("reflection lists %v, missing %s", names, want)
		}
	}
	_ = stream.CloseSend()

	// Off by default: the orphan has no reflection service.
	off, err := reflectionpb.NewServerReflectionClient(orphan.cc).ServerReflectionInfo(ctx)
	if err == nil {
		_, err = off.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("reflection without Config.Reflection: %v, want Unimplemented", err)
	}
}

func Test_DeadLetters(t *testing.T) {
	ts := mustLeader(t, Config{})
	ctx := testCtx(t)
	var ids []string
	for range 3 {
		ids = append(ids, mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q", Tenant: "acme", MaxAttempts: 1})...)
	}
	for range ids {
		resp, err := ts.q.Claim(ctx, &pb.ClaimRequest{Queue: "q", Tenant: "acme", WorkerId: "w"})
		if err != nil || len(resp.GetTasks()) != 1 {
			t.Fatalf("claim: %v, %v", resp, err)
		}
		task := resp.GetTasks()[0]
		nack, err := ts.q.Nack(ctx, &pb.NackRequest{TaskId: task.GetId(), Fence: task.GetFence(), Reason: "bad"})
		if err != nil || nack.GetState() != pb.TaskState_TASK_STATE_DEAD {
			t.Fatalf("nack: %v, %v", nack, err)
		}
	}

	// Page through them two at a time.
	var seen []string
	cursor := ""
	for {
		page, err := ts.q.ListDead(ctx, &pb.ListDeadRequest{Queue: "q", Tenant: "acme", Cursor: cursor, Limit: 2})
		if err != nil {
			t.Fatalf("list dead: %v", err)
		}
		for _, task := range page.GetTasks() {
			seen = append(seen, task.GetId())
		}
		if cursor = page.GetNextCursor(); cursor == "" {
			break
		}
	}
	if !slices.Equal(seen, ids) {
		t.Fatalf("dead letters %v, want %v", seen, ids)
	}
	_, err := ts.q.ListDead(ctx, &pb.ListDeadRequest{Queue: "q", Cursor: "t/elsewhere"})
	wantErr(t, err, codes.InvalidArgument, "", "cursor")
	// No queue: every queue of the tenant (LevelRetries).
	all, err := ts.q.ListDead(ctx, &pb.ListDeadRequest{Tenant: "acme"})
	if err != nil || len(all.GetTasks()) != len(ids) {
		t.Fatalf("dead letters of every queue of acme: %v, %v; want %d", all, err, len(ids))
	}

	// Replay one by id, then the rest of the queue.
	one, err := ts.q.RequeueDead(ctx, &pb.RequeueDeadRequest{TaskId: ids[0]})
	if err != nil || len(one.GetItems()) != 1 || one.GetItems()[0].GetState() != pb.TaskState_TASK_STATE_PENDING {
		t.Fatalf("requeue by id: %v, %v", one, err)
	}
	rest, err := ts.q.RequeueDead(ctx, &pb.RequeueDeadRequest{Queue: "q", Tenant: "acme", Limit: 10})
	if err != nil || len(rest.GetItems()) != 2 {
		t.Fatalf("requeue queue: %v, %v", rest, err)
	}
	stats, err := ts.q.Stats(ctx, &pb.StatsRequest{Queue: "q"})
	if err != nil || len(stats.GetQueues()) != 1 || stats.GetQueues()[0].GetPending() != 3 || stats.GetQueues()[0].GetDead() != 0 {
		t.Fatalf("stats: %v, %v", stats, err)
	}
}

func Test_CancelAndEnqueueDefaults(t *testing.T) {
	ts := mustLeader(t, Config{})
	ctx := testCtx(t)
	resp, err := ts.q.Enqueue(ctx, &pb.EnqueueRequest{Tasks: []*pb.NewTask{
		{Queue: "q", IdempotencyKey: "k"}, {Queue: "q", IdempotencyKey: "k"},
	}})
	if err != nil || resp.GetItems()[1].GetCode() != pb.Code_CODE_DUPLICATE {
		t.Fatalf("enqueue with a repeated key: %v, %v", resp, err)
	}
	id := resp.GetItems()[0].GetTaskId()
	for range 2 { // a repeated cancel is a success
		if _, err := ts.q.Cancel(ctx, &pb.CancelRequest{TaskId: id}); err != nil {
			t.Fatalf("cancel: %v", err)
		}
	}
	got, err := ts.q.GetTask(ctx, &pb.GetTaskRequest{TaskId: id})
	if err != nil || got.GetTask().GetState() != pb.TaskState_TASK_STATE_CANCELLED || got.GetTask().GetTenant() != "default" {
		t.Fatalf("task after cancel: %v, %v", got, err)
	}
}

func Test_MessageLimitAndMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := mustLeader(t, Config{MaxRecvMsgSize: 1024, Registerer: reg})
	_, err := ts.q.Enqueue(testCtx(t), &pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q", Payload: make([]byte, 4096)}}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("request over MaxRecvMsgSize: %v", err)
	}
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q"})
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var got []string
	for _, f := range families {
		if f.GetName() != "docket_transport_rpcs_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got = append(got, fmt.Sprintf("%s %v", strings.Join(labels, ","), m.GetCounter().GetValue()))
		}
	}
	want := []string{"code=OK,method=/docket.v1.Queue/Enqueue 1"}
	if !slices.Equal(got, want) {
		t.Fatalf("rpcs_total %v, want %v", got, want)
	}
}

// A node that reports a problem (it cannot write its log, Pebble fails,
// apply is stuck) says NOT_SERVING for the node and the Queue service,
// and SERVING again once the problem is gone. The Cluster service stays
// up so that an operator can still ask it for its status.
func Test_HealthFollowsNodeProblems(t *testing.T) {
	ts := mustLeader(t, Config{HealthInterval: 10 * time.Millisecond})
	ctx := testCtx(t)
	hc := healthpb.NewHealthClient(ts.cc)
	waitHealth := func(service string, want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
			if err == nil && resp.GetStatus() == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("health %q: %v, %v; want %v", service, resp.GetStatus(), err, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	problems := []string{"apply stuck: index 7 committed more than 5s ago is not applied"}
	ts.node.SetProblems(problems)
	waitHealth("", healthpb.HealthCheckResponse_NOT_SERVING)
	waitHealth("docket.v1.Queue", healthpb.HealthCheckResponse_NOT_SERVING)
	waitHealth("docket.v1.Cluster", healthpb.HealthCheckResponse_SERVING)

	ts.node.SetProblems(nil)
	waitHealth("", healthpb.HealthCheckResponse_SERVING)
	waitHealth("docket.v1.Queue", healthpb.HealthCheckResponse_SERVING)
}

// A node the consistency checks do not let serve (diverged, or awaiting a
// check after a restart) says NOT_SERVING overall and for the Queue
// service, refuses Queue calls with Unavailable and NOT_SERVING, and still
// answers Cluster.Status for operators and the leader's check.
func Test_UncheckedNodeRefusesQueueButAnswersStatus(t *testing.T) {
	ts := mustLeader(t, Config{HealthInterval: 10 * time.Millisecond})
	ctx := testCtx(t)
	mustEnqueue(t, ts.q, &pb.NewTask{Queue: "q", Payload: []byte("p")})
	for _, cause := range []error{check.ErrAwaitingCheck, fmt.Errorf("%w: hash differs", check.ErrDiverged)} {
		ts.node.SetCheckErr(cause)
		for _, service := range []string{"", "docket.v1.Queue"} {
			deadline := time.Now().Add(5 * time.Second)
			for {
				resp, err := healthpb.NewHealthClient(ts.cc).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
				if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%v: health %q: %v %v, want NOT_SERVING", cause, service, resp, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		_, err := ts.q.Stats(ctx, &pb.StatsRequest{Queue: "q"})
		if code, reason, _ := details(err); code != codes.Unavailable || reason != pb.ReasonNotServing {
			t.Fatalf("%v: stats: %v, want Unavailable %s", cause, err, pb.ReasonNotServing)
		}
		if _, err := ts.c.Status(ctx, &pb.StatusRequest{}); err != nil {
			t.Fatalf("%v: status: %v", cause, err)
		}
	}
	ts.node.SetCheckErr(nil)
	if _, err := ts.q.Stats(ctx, &pb.StatsRequest{Queue: "q"}); err != nil {
		t.Fatalf("serving again: %v", err)
	}
}
