package transport

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// A call that another node sends names its cluster (pb.MetadataCluster).
// A node of another cluster answers PermissionDenied; a call that names
// this cluster, or none (a client, an older build), is served.
func Test_PeerCallOfAnotherClusterRefused(t *testing.T) {
	ts := mustLeader(t, Config{})
	ctx := testCtx(t)
	for _, cmd := range []*pb.Command{
		{Type: pb.CommandType_COMMAND_TYPE_SET_FEATURE_LEVEL,
			Body: &pb.Command_SetFeatureLevel{SetFeatureLevel: &pb.SetFeatureLevelCmd{Level: fsm.FeatureLevel}}},
		{Type: pb.CommandType_COMMAND_TYPE_SET_CLUSTER_ID,
			Body: &pb.Command_SetClusterId{SetClusterId: &pb.SetClusterIDCmd{Id: "alpha"}}},
	} {
		if _, err := ts.node.Service().Propose(ctx, cmd); err != nil {
			t.Fatalf("propose %v: %v", cmd.GetType(), err)
		}
	}
	for _, tc := range []struct {
		cluster string
		want    codes.Code
	}{
		{"", codes.OK},
		{"alpha", codes.OK},
		{"beta", codes.PermissionDenied},
	} {
		cctx := ctx
		if tc.cluster != "" {
			cctx = metadata.AppendToOutgoingContext(ctx, pb.MetadataCluster, tc.cluster)
		}
		_, err := ts.q.Stats(cctx, &pb.StatsRequest{})
		if got := status.Code(err); got != tc.want {
			t.Errorf("Stats from a node of cluster %q: %v (%v), want %v", tc.cluster, got, err, tc.want)
		}
	}
}
