package leader

import (
	"context"

	"github.com/dockethq/docket/fsm"
	pb "github.com/dockethq/docket/proto/docketv1"
)

// timeOutBatch bounds one TimeOut command, like reapBatch.
const timeOutBatch = 1000

// timeOutOnce proposes TimeOut for the claims whose execution deadline
// passed by the leader's now. It waits for the cluster to latch
// LevelCancelRunning: before that no claim has a deadline, and the
// command would only be refused. The FSM re-checks fence and deadline,
// so a Submit that lands between this scan and the apply wins.
func (l *Loops) timeOutOnce(ctx context.Context) error {
	if l.h.EnabledLevel() < fsm.LevelCancelRunning {
		return nil
	}
	items, err := l.h.FSM().PastDeadlines(l.h.Now().UnixNano(), timeOutBatch)
	if err != nil || len(items) == 0 {
		return err
	}
	res, err := l.propose(ctx, &pb.Command{
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
	l.log.Info("ended claims past their execution deadline", "seen", len(items), "ended", ended)
	return nil
}
