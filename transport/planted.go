//go:build !plantedbugs

package transport

import (
	"context"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// planted reports whether a planted fault is on: the constant false
// without the plantedbugs build tag, so the compiler drops every hook
// (planted_on.go has the faults).
func planted(string) bool { return false }

// proposeEarly is never called without the tag; it proposes as usual.
func (s *Server) proposeEarly(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	return s.svc.Propose(ctx, cmd)
}
