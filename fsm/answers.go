package fsm

import (
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Answer bounds. They are constants of the FSM, not node configuration, so
// a Claim takes the same tasks on every replica.
const (
	// AnswerBudget bounds the encoded tasks of one list answer: a Claim's
	// tasks (per caller, also inside a Batch), a ListTasks page. A list
	// stops before the task that would pass it, and always holds at least
	// one, so an answer is at most max(AnswerBudget, one task's bytes).
	// 4 MiB is gRPC's default receive limit: three tasks at the default
	// 1 MiB payload limit, four of 1 MB.
	AnswerBudget = 4 << 20
	// MaxTaskBytes bounds one encoded Task record: payload, progress and
	// result (each at most PayloadCeiling), last_error (MaxErrorLen), and
	// 2 KiB for everything else (id 64, queue and tenant 128 each,
	// idempotency key 256, worker id 256, 17 varints of at most 12 bytes
	// with their tags, 10 length prefixes: under 1.5 KiB).
	// Test_MaxTaskBytesBoundsALargestTask builds the largest task and
	// checks.
	// From LevelAttempts on, a record also holds up to MaxHistory
	// attempts of at most MaxAttemptBytes each.
	MaxTaskBytes = 3*PayloadCeiling + MaxErrorLen + 2<<10 + MaxHistory*MaxAttemptBytes
	// listItemOverhead is the tag and length prefix of one task in a
	// repeated field: 1 byte of tag, at most 4 of length (< 2^28).
	listItemOverhead = 5
	// claimOverhead bounds what a claim adds to a task's record: fence,
	// lease_ns, lease_until, claimed_at and claims with their tags (11 or
	// 12 bytes each), and the worker id's tag and length prefix.
	claimOverhead = 64
)

// answerBytes is what t costs in a list answer.
func answerBytes(t *pb.Task) int { return proto.Size(t) + listItemOverhead }

// budget counts the bytes of one list answer against AnswerBudget.
type budget struct{ used int }

// take reports whether an item of n bytes fits, and counts it if so. The
// first item always fits.
func (b *budget) take(n int) bool {
	if b.used > 0 && b.used+n > AnswerBudget {
		return false
	}
	b.used += n
	return true
}

// release puts back tasks whose claim answer never reached its caller: a
// task still running under exactly the fence of that claim returns to
// pending at its old seq (the head of its priority, where it was taken
// from), with no attempt counted and no worker. Any other task is answered
// as heartbeat would (STALE_FENCE, NOT_FOUND) and left alone, so a release
// that arrives after the lease was reaped, or after another claim, does
// nothing.
//
// It is safe because the fence is the claim's log index, which only the
// lost answer carried: no worker holds it, so no worker can be working on
// the task, and a late Submit or Heartbeat with it would be stale anyway.
func (tx *txn) release(c *pb.ReleaseCmd, res *pb.CommandResult) error {
	for _, ri := range c.GetItems() {
		t, code, err := tx.running(ri.GetTaskId(), ri.GetFence())
		if err != nil {
			return err
		}
		if code != pb.Code_CODE_OK {
			res.Items = append(res.Items, item(code, ri.GetTaskId(), t, staleDetail(t, ri.GetFence())))
			continue
		}
		// A task cancelled while its claim's answer was lost never runs
		// again: it ends rather than go back (rules_cancel.go).
		ended, err := tx.endIfCancelled(t, cancelledWhy("its claim's answer never reached the worker"), nil)
		if err == nil && !ended {
			err = tx.move(t, pb.TaskState_TASK_STATE_PENDING, func(t *pb.Task) {
				tx.closeAttempt(t, pb.AttemptOutcome_ATTEMPT_OUTCOME_RELEASED, "")
				t.WorkerId = ""
			})
		}
		if err != nil {
			return err
		}
		if tx.feature >= LevelAttempts {
			if err := tx.total(t, func(tt *storage.QueueTotals) { tt.Released++ }); err != nil {
				return err
			}
		}
		res.Items = append(res.Items, item(pb.Code_CODE_OK, t.GetId(), t, ""))
	}
	return nil
}
