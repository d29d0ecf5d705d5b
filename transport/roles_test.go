package transport

import (
	"errors"
	"testing"

	"github.com/dockethq/docket/cluster"
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
		{"producer enqueues its tenant", tok(cluster.RoleProducer, "a"), pb.Queue_Enqueue_FullMethodName, "a", nil},
		{"producer, other tenant", tok(cluster.RoleProducer, "a"), pb.Queue_Enqueue_FullMethodName, "b", cluster.ErrPermissionDenied},
		{"producer cannot claim", tok(cluster.RoleProducer, "a"), pb.Queue_Claim_FullMethodName, "a", cluster.ErrPermissionDenied},
		{"producer waits", tok(cluster.RoleProducer, "a"), pb.Queue_WaitResult_FullMethodName, "a", nil},
		{"worker claims", tok(cluster.RoleWorker, "a"), pb.Queue_Claim_FullMethodName, "a", nil},
		{"worker submits a batch", tok(cluster.RoleWorker, "*"), pb.Queue_SubmitBatch_FullMethodName, "z", nil},
		{"worker cannot enqueue", tok(cluster.RoleWorker, "a"), pb.Queue_Enqueue_FullMethodName, "a", cluster.ErrPermissionDenied},
		{"worker cannot cancel", tok(cluster.RoleWorker, "a"), pb.Queue_Cancel_FullMethodName, "a", cluster.ErrPermissionDenied},
		{"reader gets", tok(cluster.RoleReader, "a"), pb.Queue_GetTask_FullMethodName, "a", nil},
		{"reader lists stats", tok(cluster.RoleReader, "a"), pb.Queue_Stats_FullMethodName, "", nil},
		{"reader cannot list dead", tok(cluster.RoleReader, "a"), pb.Queue_ListDead_FullMethodName, "a", cluster.ErrPermissionDenied},
		{"tenant admin cancels", tok(cluster.RoleAdmin, "a"), pb.Queue_Cancel_FullMethodName, "a", nil},
		{"tenant admin, requeue by id", tok(cluster.RoleAdmin, "a"), pb.Queue_RequeueDead_FullMethodName, "", cluster.ErrPermissionDenied},
		{"tenant admin cannot transfer", tok(cluster.RoleAdmin, "a"), pb.Cluster_TransferLeadership_FullMethodName, "", cluster.ErrPermissionDenied},
		{"admin * transfers", tok(cluster.RoleAdmin, "*"), pb.Cluster_TransferLeadership_FullMethodName, "", nil},
		{"admin * creates tokens", tok(cluster.RoleAdmin, "*"), pb.Cluster_CreateToken_FullMethodName, "", nil},
		{"worker * cannot remove", tok(cluster.RoleWorker, "*"), pb.Cluster_RemoveServer_FullMethodName, "", cluster.ErrPermissionDenied},
		{"unknown method", tok(cluster.RoleAdmin, "*"), "/docket.v1.Queue/Nope", "", cluster.ErrPermissionDenied},
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
