package fsm

import (
	"unicode/utf8"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Attempt history bounds. They are constants of the FSM: every replica
// must keep the same records.
const (
	// MaxHistory is how many attempts a task keeps: the last ones, oldest
	// dropped first. 16 is three times the default max_attempts (5), so a
	// task that dead-letters under the defaults keeps every attempt, with
	// room for releases and requeued dead letters; a full history is about
	// 16 x 590 bytes (MaxAttemptBytes), under 10 KiB on the record.
	MaxHistory = 16
	// MaxAttemptError bounds the error kept on one attempt: enough for a
	// message a person reads on the task page. The whole last error stays
	// in Task.last_error (up to MaxErrorLen); keeping 64 KiB per attempt
	// would make a history up to 1 MiB of every record's rewrite.
	MaxAttemptError = 256
	// MaxAttemptBytes bounds one encoded attempt in a task record: the
	// worker id and error with their tags and length prefixes, 6 varints
	// with tags (at most 11 bytes each), and the attempt's own tag and
	// length prefix.
	MaxAttemptBytes = MaxWorkerIDLen + MaxAttemptError + 128
)

// openAttempt records a claim on t, once the cluster latched
// LevelAttempts: called by claim after it set the fence and lease.
func (tx *txn) openAttempt(t *pb.Task) {
	if tx.feature < LevelAttempts {
		return
	}
	h := append(t.History, &pb.Attempt{
		Claim:      t.GetClaims(),
		WorkerId:   t.GetWorkerId(),
		Fence:      t.GetFence(),
		ClaimedAt:  t.GetClaimedAt(),
		LeaseUntil: t.GetLeaseUntil(),
		DeadlineAt: t.GetDeadlineAt(),
	})
	if n := len(h) - MaxHistory; n > 0 {
		h = append(h[:0], h[n:]...)
	}
	t.History = h
}

// current is t's open attempt: the last record, when it belongs to the
// claim t runs under and has not ended. nil for a claim made before the
// latch, which has no record.
func current(t *pb.Task) *pb.Attempt {
	h := t.GetHistory()
	if len(h) == 0 {
		return nil
	}
	a := h[len(h)-1]
	if a.GetEndedAt() != 0 || a.GetOutcome() != pb.AttemptOutcome_ATTEMPT_OUTCOME_UNSPECIFIED || a.GetFence() != t.GetFence() {
		return nil
	}
	return a
}

// renewAttempt keeps the open attempt's lease expiry in step with a
// heartbeat.
func (tx *txn) renewAttempt(t *pb.Task) {
	if a := current(t); a != nil && tx.feature >= LevelAttempts {
		a.LeaseUntil = t.GetLeaseUntil()
	}
}

// closeAttempt ends t's open attempt with out and the error, cut to
// MaxAttemptError. Called inside the move's mutate, before the task's
// fields change.
func (tx *txn) closeAttempt(t *pb.Task, out pb.AttemptOutcome, err string) {
	a := current(t)
	if a == nil || tx.feature < LevelAttempts {
		return
	}
	a.LeaseUntil = t.GetLeaseUntil()
	a.EndedAt = tx.now
	a.Outcome = out
	a.Error = cutUTF8(err, MaxAttemptError)
}

// cutUTF8 is s cut to at most n bytes, not inside a rune, so that the
// record stays valid proto3 (strings must be UTF-8). A string that is
// not UTF-8 at all is cut at n.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut > n-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if !utf8.RuneStart(s[cut]) {
		cut = n
	}
	return s[:cut]
}
