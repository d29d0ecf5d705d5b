package cluster

import (
	"errors"
	"testing"

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
