package service_test

import (
	"errors"
	"testing"

	"github.com/dockethq/docket/cluster/memnode"
	"github.com/dockethq/docket/cluster/service"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// Admit builds, defaults and checks a write once; a request a peer
// already admitted is built but not checked again; a read is no write.
func Test_AdmitBuildsDefaultsAndChecksOnce(t *testing.T) {
	m, err := memnode.New(t.TempDir(), true, service.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	s := m.Service()

	cmd, err := s.Admit(&pb.EnqueueRequest{Tasks: []*pb.NewTask{{Queue: "q"}}}, false)
	if err != nil {
		t.Fatalf("admit a good enqueue: %v", err)
	}
	if got := cmd.GetEnqueue().GetTasks()[0].GetTenant(); got != pb.DefaultTenant {
		t.Fatalf("tenant %q, want the default filled in", got)
	}

	bad := &pb.ClaimRequest{Queue: "q", WaitNs: -1}
	var fe *pb.FieldError
	if _, err := s.Admit(bad, false); !errors.As(err, &fe) || fe.Field != "wait_ns" {
		t.Fatalf("admit a negative wait: %v, want a wait_ns field error", err)
	}
	before := s.Checks()
	if _, err := s.Admit(bad, true); err != nil {
		t.Fatalf("admit of a request a peer admitted: %v", err)
	}
	if s.Checks() != before {
		t.Fatal("a request a peer admitted was checked again")
	}

	if _, err := s.Admit(&pb.GetTaskRequest{TaskId: "x"}, false); err == nil {
		t.Fatal("a read was admitted as a write")
	}
}
