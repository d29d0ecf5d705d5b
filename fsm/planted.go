//go:build !plantedbugs

package fsm

import pb "github.com/dockethq/docket/proto/docketv1"

// planted reports whether the planted fault name is on. Without the
// plantedbugs build tag it is the constant false: the compiler drops every
// hook, and a release build has no planted code to reach (see
// planted_on.go and jepsen/DESIGN.md, "Planted faults").
func planted(string) bool { return false }

// plantForgetDelay is unused without the tag (planted_on.go).
const plantForgetDelay = 0

// plantLimit leaves the command as it is without the tag (planted_on.go).
func plantLimit(c *pb.SetQueueLimitsCmd) *pb.SetQueueLimitsCmd { return c }

// plantReap does nothing without the tag (planted_on.go).
func (tx *txn) plantReap() error { return nil }
