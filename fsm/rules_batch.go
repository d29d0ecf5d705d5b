package fsm

import (
	pb "github.com/dockethq/docket/proto/docketv1"
)

// MaxBatchCommands bounds the commands of one Batch entry.
const MaxBatchCommands = 1024

// maxPositions is the room in an entry for task positions: seqs and task
// ids keep the position within the entry in 16 bits (see nextSeq, TaskID).
const maxPositions = 1 << 16

// Positions is how many task positions cmd may use within its entry: one
// per enqueued task, up to pb.MaxBatch for a Claim (it may promote that many
// due delayed tasks), one for a Nack. A Batch gives each command its own
// range, so ids and seqs of its commands never collide, and the leader
// keeps a batch's sum within one entry's 16 bits.
func Positions(cmd *pb.Command) int {
	switch cmd.GetType() {
	case pb.CommandType_COMMAND_TYPE_ENQUEUE:
		return len(cmd.GetEnqueue().GetTasks())
	case pb.CommandType_COMMAND_TYPE_CLAIM:
		return pb.MaxBatch
	case pb.CommandType_COMMAND_TYPE_NACK:
		return 1
	default:
		return 0
	}
}

// Batchable reports whether cmd may be a command of a Batch: the client
// commands. The leader's own commands (reap, promote, purge) and operator
// commands stay entries of their own, and batches do not nest.
func Batchable(t pb.CommandType) bool {
	switch t {
	case pb.CommandType_COMMAND_TYPE_ENQUEUE, pb.CommandType_COMMAND_TYPE_CLAIM,
		pb.CommandType_COMMAND_TYPE_HEARTBEAT, pb.CommandType_COMMAND_TYPE_SUBMIT,
		pb.CommandType_COMMAND_TYPE_NACK, pb.CommandType_COMMAND_TYPE_CANCEL:
		return true
	}
	return false
}

// validateBatch checks the batch's shape only. Each command's own values
// are checked when it runs, so a bad one is rejected alone.
func validateBatch(b *pb.BatchCmd) error {
	cmds := b.GetCommands()
	if err := checkCount("commands", len(cmds), 1, MaxBatchCommands); err != nil {
		return err
	}
	used := 0
	for i, c := range cmds {
		if !Batchable(c.GetType()) {
			return inItem("commands", i, fieldErr("type", "%v cannot be batched", c.GetType()))
		}
		if err := checkBody(c); err != nil {
			return inItem("commands", i, err)
		}
		// Checked per command so that the sum cannot overflow.
		if used += Positions(c); used > maxPositions {
			return fieldErr("commands", "need more than %d task positions", maxPositions)
		}
	}
	return nil
}

// batch runs each command as if it were an entry of its own, at this
// entry's index and time, each in its own range of task positions.
func (tx *txn) batch(c *pb.BatchCmd, res *pb.CommandResult) error {
	for _, sub := range c.GetCommands() {
		r := &pb.CommandResult{Index: tx.index, Now: tx.now}
		rejected, err := tx.reject(sub, r)
		if err == nil && !rejected {
			err = tx.run(sub, r)
		}
		if err != nil {
			return err
		}
		res.Results = append(res.Results, r)
		tx.base += Positions(sub)
	}
	return nil
}
