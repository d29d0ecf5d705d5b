package service

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

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
		{"reader", tok([]string{pb.RoleReader}, "acme"), false, []uint64{0, 0, 0, 0}},
		{"producer", tok([]string{pb.RoleProducer}, "acme"), false, []uint64{0, 0, 0, 0}},
		{"worker", tok([]string{pb.RoleWorker}, "acme"), false, []uint64{0, 0, 0, 0}},
		{"admin of the tenant", tok([]string{pb.RoleReader, pb.RoleAdmin}, "acme"), false, []uint64{0, 10, 20, 0}},
		{"admin of every tenant", tok([]string{pb.RoleAdmin}, pb.AllTenants), false, []uint64{0, 10, 20, 0}},
		{"admin of another tenant", tok([]string{pb.RoleReader, pb.RoleAdmin}, "beta", "acme2"), false, []uint64{0, 0, 0, 0}},
		{"admin, listing", tok([]string{pb.RoleReader, pb.RoleAdmin}, "acme"), true, []uint64{0, 10, 20, 0}},
		{"reader, listing", tok([]string{pb.RoleReader}, "acme"), true, []uint64{0, 0, 0, 0}},
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
