package transport

import (
	"errors"
	"testing"

	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_RoleTable: each role allows exactly its methods, over its
// tenants; cluster-wide calls need "*"; unknown methods are closed.
func Test_RoleTable(t *testing.T) {
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
		{"producer enqueues its tenant", tok(pb.RoleProducer, "a"), pb.Queue_Enqueue_FullMethodName, "a", nil},
		{"producer, other tenant", tok(pb.RoleProducer, "a"), pb.Queue_Enqueue_FullMethodName, "b", service.ErrPermissionDenied},
		{"producer cannot claim", tok(pb.RoleProducer, "a"), pb.Queue_Claim_FullMethodName, "a", service.ErrPermissionDenied},
		{"producer waits", tok(pb.RoleProducer, "a"), pb.Queue_WaitResult_FullMethodName, "a", nil},
		{"worker claims", tok(pb.RoleWorker, "a"), pb.Queue_Claim_FullMethodName, "a", nil},
		{"worker submits a batch", tok(pb.RoleWorker, "*"), pb.Queue_SubmitBatch_FullMethodName, "z", nil},
		{"worker cannot enqueue", tok(pb.RoleWorker, "a"), pb.Queue_Enqueue_FullMethodName, "a", service.ErrPermissionDenied},
		{"worker cannot cancel", tok(pb.RoleWorker, "a"), pb.Queue_Cancel_FullMethodName, "a", service.ErrPermissionDenied},
		{"reader gets", tok(pb.RoleReader, "a"), pb.Queue_GetTask_FullMethodName, "a", nil},
		{"reader lists stats", tok(pb.RoleReader, "a"), pb.Queue_Stats_FullMethodName, "", nil},
		{"reader cannot list dead", tok(pb.RoleReader, "a"), pb.Queue_ListDead_FullMethodName, "a", service.ErrPermissionDenied},
		{"tenant admin cancels", tok(pb.RoleAdmin, "a"), pb.Queue_Cancel_FullMethodName, "a", nil},
		{"tenant admin, requeue by id", tok(pb.RoleAdmin, "a"), pb.Queue_RequeueDead_FullMethodName, "", service.ErrPermissionDenied},
		{"tenant admin cannot transfer", tok(pb.RoleAdmin, "a"), pb.Cluster_TransferLeadership_FullMethodName, "", service.ErrPermissionDenied},
		{"admin * transfers", tok(pb.RoleAdmin, "*"), pb.Cluster_TransferLeadership_FullMethodName, "", nil},
		{"admin * creates tokens", tok(pb.RoleAdmin, "*"), pb.Cluster_CreateToken_FullMethodName, "", nil},
		{"worker * cannot remove", tok(pb.RoleWorker, "*"), pb.Cluster_RemoveServer_FullMethodName, "", service.ErrPermissionDenied},
		{"unknown method", tok(pb.RoleAdmin, "*"), "/docket.v1.Queue/Nope", "", service.ErrPermissionDenied},
	}
	for _, c := range cases {
		if err := authorizeToken(c.tok, c.method, c.tenant); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if !openMethod(pb.Cluster_Status_FullMethodName) || openMethod(pb.Cluster_RemoveServer_FullMethodName) {
		t.Error("only Status is open")
	}
}
