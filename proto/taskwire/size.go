package taskwire

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Size is proto.Size(t), counted by hand. Apply counts a task's size
// against its tenant's bytes at every change of its state and against a
// claim answer's budget at every claim; through proto's reflection that
// was 4–5 % of a leader's CPU in the batched cycle and the drain
// (BENCHMARKS.md). The count is replicated state (tenant usage), so it
// must be proto's to the byte: Test_TaskCodecMatchesProto and
// FuzzTaskCodec hold the two equal, and what the hand encoder leaves to
// proto (unknown fields, a nil attempt) proto counts here too.
func Size(t *pb.Task) int {
	if !plainTask(t) {
		return proto.Size(t)
	}
	n := sizeString(tfID, t.Id) + sizeString(tfQueue, t.Queue) + sizeString(tfTenant, t.Tenant) +
		sizeBytes(tfPayload, len(t.Payload)) +
		sizeVarint(tfPriority, uint64(t.Priority)) + sizeVarint(tfState, uint64(t.State)) +
		sizeVarint(tfAttempts, uint64(t.Attempts)) + sizeVarint(tfMaxAttempts, uint64(t.MaxAttempts)) +
		sizeString(tfIdemKey, t.IdempotencyKey) + sizeVarint(tfRetention, uint64(t.RetentionNs)) +
		sizeVarint(tfCreatedAt, uint64(t.CreatedAt)) + sizeVarint(tfVisibleAt, uint64(t.VisibleAt)) +
		sizeVarint(tfSeq, t.Seq) + sizeVarint(tfFence, t.Fence) + sizeString(tfWorkerID, t.WorkerId) +
		sizeVarint(tfLeaseNs, uint64(t.LeaseNs)) + sizeVarint(tfLeaseUntil, uint64(t.LeaseUntil)) +
		sizeVarint(tfClaimedAt, uint64(t.ClaimedAt)) + sizeBytes(tfProgress, len(t.Progress)) +
		sizeVarint(tfOutcome, uint64(t.Outcome)) + sizeBytes(tfResult, len(t.Result)) +
		sizeString(tfLastError, t.LastError) + sizeVarint(tfFinishedAt, uint64(t.FinishedAt)) +
		sizeVarint(tfExpireAt, uint64(t.ExpireAt)) + sizeVarint(tfClaims, uint64(t.Claims)) +
		sizeString(tfSchedule, t.Schedule) + sizeVarint(tfScheduleSlot, uint64(t.ScheduleSlot)) +
		sizeBool(tfCancelRequested, t.CancelRequested) + sizeVarint(tfTimeoutNs, uint64(t.TimeoutNs)) +
		sizeVarint(tfDeadlineAt, uint64(t.DeadlineAt)) + sizeBool(tfRetryOnTimeout, t.RetryOnTimeout) +
		sizeVarint(tfCancelRequestedAt, uint64(t.CancelRequestedAt)) +
		sizeVarint(tfWaiting, uint64(t.Waiting)) + sizeVarint(tfOnParentFailure, uint64(t.OnParentFailure)) +
		sizeVarint(tfChildren, uint64(t.Children)) + sizeBytes(tfKey, len(t.Key))
	for _, a := range t.History {
		n += sizeMessage(tfHistory, attemptSize(a))
	}
	for _, p := range t.Parents {
		n += protowire.SizeTag(tfParents) + protowire.SizeBytes(len(p))
	}
	if r := t.Retry; r != nil {
		n += sizeMessage(tfRetry, sizeVarint(rfBase, uint64(r.BaseNs))+sizeVarint(rfCap, uint64(r.CapNs))+
			sizeVarint(rfMultiplier, uint64(r.Multiplier))+sizeVarint(rfJitter, uint64(r.JitterPercent)))
	}
	return n
}

// PayloadFieldSize is what a payload of n bytes adds to Size: a split
// record's header is encoded without it.
func PayloadFieldSize(n int) int { return sizeBytes(tfPayload, n) }

func attemptSize(a *pb.Attempt) int {
	return sizeVarint(afClaim, uint64(a.Claim)) + sizeString(afWorkerID, a.WorkerId) +
		sizeVarint(afFence, a.Fence) + sizeVarint(afClaimedAt, uint64(a.ClaimedAt)) +
		sizeVarint(afLeaseUntil, uint64(a.LeaseUntil)) + sizeVarint(afEndedAt, uint64(a.EndedAt)) +
		sizeVarint(afOutcome, uint64(a.Outcome)) + sizeString(afError, a.Error) +
		sizeVarint(afCancelRequestedAt, uint64(a.CancelRequestedAt)) + sizeVarint(afDeadlineAt, uint64(a.DeadlineAt))
}

// The sizes of what appendVarint, appendBool, appendString and appendBytes
// write, empty values included.
func sizeVarint(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func sizeBool(num protowire.Number, v bool) int {
	if !v {
		return 0
	}
	return protowire.SizeTag(num) + 1
}

func sizeString(num protowire.Number, s string) int { return sizeBytes(num, len(s)) }

func sizeBytes(num protowire.Number, n int) int {
	if n == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// sizeMessage is the size of an embedded message of n bytes, which proto
// writes even when it is empty.
func sizeMessage(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}
