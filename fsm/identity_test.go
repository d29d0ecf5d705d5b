package fsm

import (
	"testing"

	pb "github.com/dockethq/docket/proto/docketv1"
)

func setIDCmd(id string) *pb.Command {
	return &pb.Command{Type: pb.CommandType_COMMAND_TYPE_SET_CLUSTER_ID,
		Body: &pb.Command_SetClusterId{SetClusterId: &pb.SetClusterIDCmd{Id: id}}}
}

// A cluster's id is set once: a later SetClusterID (a second leader that
// had not seen the first, or a forged entry) cannot rename the cluster
// its peers already know, and the id survives a restart.
func Test_ClusterIDSetOnce(t *testing.T) {
	h := newHarness(t)
	if got := h.f.ClusterID(); got != "" {
		t.Fatalf("new FSM's cluster id %q, want none", got)
	}
	h.apply(latchCmd(FeatureLevel))
	h.do(setIDCmd("first"))
	h.do(setIDCmd("second"))
	if got := h.f.ClusterID(); got != "first" {
		t.Fatalf("cluster id %q after two SetClusterID, want the first", got)
	}
	h.reopen()
	if got := h.f.ClusterID(); got != "first" {
		t.Fatalf("cluster id %q after reopen, want first", got)
	}
	checkKeyspace(t, h.f)
}

func Test_ClusterIDValidate(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"0123456789abcdef0123456789abcdef", true},
		{"prod-eu.1", true},
		{"", false},
		{"a/b", false},
		{string(make([]byte, MaxClusterIDLen+1)), false},
	} {
		err := Validate(setIDCmd(tc.id), Limits{})
		if (err == nil) != tc.ok {
			t.Errorf("Validate(SetClusterID %q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
	}
}
