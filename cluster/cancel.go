package cluster

import (
	"context"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// ErrTimedOut: the claim ran past its execution deadline (a task's
// timeout_ns); the worker must stop, and the leader ends the claim.
var ErrTimedOut = fsm.ErrTimedOut

// timeOutBatch bounds one TimeOut command, like reapBatch.
const timeOutBatch = 1000

// timeOutOnce proposes TimeOut for the claims whose execution deadline
// passed by the leader's now. It waits for the cluster to latch
// LevelCancelRunning: before that no claim has a deadline, and the
// command would only be refused. The FSM re-checks fence and deadline,
// so a Submit that lands between this scan and the apply wins.
func (n *Node) timeOutOnce(ctx context.Context) error {
	if n.EnabledLevel() < fsm.LevelCancelRunning {
		return nil
	}
	items, err := n.fsm.PastDeadlines(n.clock.Now().UnixNano(), timeOutBatch)
	if err != nil || len(items) == 0 {
		return err
	}
	res, err := n.propose(ctx, &pb.Command{
		Type: pb.CommandType_COMMAND_TYPE_TIME_OUT,
		Body: &pb.Command_TimeOut{TimeOut: &pb.TimeOutCmd{Items: items}},
	})
	if err != nil {
		return err
	}
	ended := 0
	for _, it := range res.GetItems() {
		if it.GetCode() == pb.Code_CODE_OK {
			ended++
		}
	}
	n.log.Info("ended claims past their execution deadline", "seen", len(items), "ended", ended)
	return nil
}
