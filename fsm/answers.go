package fsm

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

// claimedBytes is what a claimed task of taskBytes size costs in the
// claim's answer, with what the claim adds to it.
func claimedBytes(size int64, worker string) int {
	return int(size) + listItemOverhead + claimOverhead + len(worker)
}

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
