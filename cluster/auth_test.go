package cluster

import (
	"errors"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_AuthorizeRoleTable: each role allows exactly its methods, over its
// tenants; cluster-wide calls need "*"; unknown methods are closed.
func Test_AuthorizeRoleTable(t *testing.T) {
	tok := func(role string, tenants ...string) *pb.Token {
		return &pb.Token{Roles: []string{role}, Tenants: tenants}
	}
	cases := []struct {
		name   string
		tok    *pb.Token
		method string
		tenant string
		want   error
	}{
		{"producer enqueues its tenant", tok(RoleProducer, "a"), pb.Queue_Enqueue_FullMethodName, "a", nil},
		{"producer, other tenant", tok(RoleProducer, "a"), pb.Queue_Enqueue_FullMethodName, "b", ErrPermissionDenied},
		{"producer cannot claim", tok(RoleProducer, "a"), pb.Queue_Claim_FullMethodName, "a", ErrPermissionDenied},
		{"producer waits", tok(RoleProducer, "a"), pb.Queue_WaitResult_FullMethodName, "a", nil},
		{"worker claims", tok(RoleWorker, "a"), pb.Queue_Claim_FullMethodName, "a", nil},
		{"worker submits a batch", tok(RoleWorker, "*"), pb.Queue_SubmitBatch_FullMethodName, "z", nil},
		{"worker cannot enqueue", tok(RoleWorker, "a"), pb.Queue_Enqueue_FullMethodName, "a", ErrPermissionDenied},
		{"worker cannot cancel", tok(RoleWorker, "a"), pb.Queue_Cancel_FullMethodName, "a", ErrPermissionDenied},
		{"reader gets", tok(RoleReader, "a"), pb.Queue_GetTask_FullMethodName, "a", nil},
		{"reader lists stats", tok(RoleReader, "a"), pb.Queue_Stats_FullMethodName, "", nil},
		{"reader cannot list dead", tok(RoleReader, "a"), pb.Queue_ListDead_FullMethodName, "a", ErrPermissionDenied},
		{"tenant admin cancels", tok(RoleAdmin, "a"), pb.Queue_Cancel_FullMethodName, "a", nil},
		{"tenant admin, requeue by id", tok(RoleAdmin, "a"), pb.Queue_RequeueDead_FullMethodName, "", ErrPermissionDenied},
		{"tenant admin cannot transfer", tok(RoleAdmin, "a"), pb.Cluster_TransferLeadership_FullMethodName, "", ErrPermissionDenied},
		{"admin * transfers", tok(RoleAdmin, "*"), pb.Cluster_TransferLeadership_FullMethodName, "", nil},
		{"admin * creates tokens", tok(RoleAdmin, "*"), pb.Cluster_CreateToken_FullMethodName, "", nil},
		{"worker * cannot remove", tok(RoleWorker, "*"), pb.Cluster_RemoveServer_FullMethodName, "", ErrPermissionDenied},
		{"unknown method", tok(RoleAdmin, "*"), "/docket.v1.Queue/Nope", "", ErrPermissionDenied},
	}
	for _, c := range cases {
		if err := Authorize(c.tok, c.method, c.tenant); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if !OpenMethod(pb.Cluster_Status_FullMethodName) || OpenMethod(pb.Cluster_RemoveServer_FullMethodName) {
		t.Error("only Status is open")
	}
}

// Test_TaskForFenceRule is the fence rule as a table: the current claim's
// fence (task and open attempt) reaches no token holder and no listing;
// ended attempts' fences reach admins of the task's tenant only; auth off
// hides nothing on GetTask.
func Test_TaskForFenceRule(t *testing.T) {
	task := func() *pb.Task {
		return &pb.Task{Id: "a", Tenant: "acme", State: pb.TaskState_TASK_STATE_RUNNING, Fence: 30, History: []*pb.Attempt{
			{Claim: 1, Fence: 10, EndedAt: 5, Outcome: pb.AttemptOutcome_ATTEMPT_OUTCOME_NACKED},
			{Claim: 2, Fence: 20, EndedAt: 6, Outcome: pb.AttemptOutcome_ATTEMPT_OUTCOME_EXPIRED},
			{Claim: 3, Fence: 30},
		}}
	}
	tok := func(roles []string, tenants ...string) *pb.Token { return &pb.Token{Roles: roles, Tenants: tenants} }
	cases := []struct {
		name    string
		tok     *pb.Token
		listing bool
		// want: the task's fence, then each attempt's.
		want []uint64
	}{
		{"auth off", nil, false, []uint64{30, 10, 20, 30}},
		{"auth off, listing", nil, true, []uint64{0, 10, 20, 0}},
		{"reader", tok([]string{RoleReader}, "acme"), false, []uint64{0, 0, 0, 0}},
		{"producer", tok([]string{RoleProducer}, "acme"), false, []uint64{0, 0, 0, 0}},
		{"worker", tok([]string{RoleWorker}, "acme"), false, []uint64{0, 0, 0, 0}},
		{"admin of the tenant", tok([]string{RoleReader, RoleAdmin}, "acme"), false, []uint64{0, 10, 20, 0}},
		{"admin of every tenant", tok([]string{RoleAdmin}, AllTenants), false, []uint64{0, 10, 20, 0}},
		{"admin of another tenant", tok([]string{RoleReader, RoleAdmin}, "beta", "acme2"), false, []uint64{0, 0, 0, 0}},
		{"admin, listing", tok([]string{RoleReader, RoleAdmin}, "acme"), true, []uint64{0, 10, 20, 0}},
		{"reader, listing", tok([]string{RoleReader}, "acme"), true, []uint64{0, 0, 0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := task()
			var got *pb.Task
			if c.listing {
				got = ListedTaskFor(c.tok, in)
			} else {
				got = TaskFor(c.tok, in)
			}
			fences := []uint64{got.GetFence()}
			for _, a := range got.GetHistory() {
				fences = append(fences, a.GetFence())
			}
			if !slices.Equal(fences, c.want) {
				t.Fatalf("fences (task, attempts) %v, want %v", fences, c.want)
			}
			if !proto.Equal(in, task()) {
				t.Fatal("the rule changed the caller's task")
			}
		})
	}
}
