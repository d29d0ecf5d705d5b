//go:build plantedbugs

package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dockethq/docket/cluster/replica"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// PlantAckBeforeCommit is the planted fault of the transport: the leader
// acknowledges an Enqueue whose entry has not committed within
// plantAckWait (or whose outcome became unknown) with made-up task ids,
// as a server that answered after its local append would. Only a build
// with the plantedbugs tag, which no release sets, has it; DOCKET_PLANT
// names the faults on (jepsen/DESIGN.md, "Planted faults").
const PlantAckBeforeCommit = "ack-before-commit"

// plantAckWait is how long the planted Enqueue waits for its commit
// before it answers anyway.
const plantAckWait = 150 * time.Millisecond

var plantedFaults = os.Getenv("DOCKET_PLANT")

// plantEarlyIDs numbers the made-up ids.
var plantEarlyIDs atomic.Uint64

func planted(name string) bool {
	for _, p := range strings.Split(plantedFaults, ",") {
		if p == name {
			return true
		}
	}
	return false
}

// proposeEarly proposes cmd and, for an Enqueue, answers OK without the
// commit when it is slow or its outcome unknown. The proposal goes on in
// the background, bounded by the apply timeout.
func (s *Server) proposeEarly(ctx context.Context, cmd *pb.Command) (*pb.CommandResult, error) {
	if cmd.GetType() != pb.CommandType_COMMAND_TYPE_ENQUEUE {
		return s.svc.Propose(ctx, cmd)
	}
	type answer struct {
		res *pb.CommandResult
		err error
	}
	done := make(chan answer, 1)
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	go func() {
		defer cancel()
		res, err := s.svc.Propose(bg, cmd)
		done <- answer{res, err}
	}()
	t := time.NewTimer(plantAckWait)
	defer t.Stop()
	select {
	case a := <-done:
		if a.err == nil || !(errors.Is(a.err, replica.ErrLeadershipLost) || errors.Is(a.err, context.DeadlineExceeded)) {
			return a.res, a.err
		}
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res := &pb.CommandResult{}
	for range cmd.GetEnqueue().GetTasks() {
		id := fmt.Sprintf("early%011d", plantEarlyIDs.Add(1))
		res.Items = append(res.Items, &pb.ItemResult{Code: pb.Code_CODE_OK, TaskId: id, State: pb.TaskState_TASK_STATE_PENDING})
	}
	return res, nil
}
