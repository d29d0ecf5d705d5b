package taskwire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// marshal is proto's deterministic encoding, which Append writes by hand.
var marshal = proto.MarshalOptions{Deterministic: true}

// Field numbers of pb.Task, pb.Attempt and pb.RetryPolicy (task.proto).
const (
	tfID, tfQueue, tfTenant, tfPayload, tfPriority, tfState            = 1, 2, 3, 4, 5, 6
	tfAttempts, tfMaxAttempts, tfIdemKey, tfRetention                  = 7, 8, 9, 10
	tfCreatedAt, tfVisibleAt, tfSeq, tfFence, tfWorkerID               = 11, 12, 13, 14, 15
	tfLeaseNs, tfLeaseUntil, tfClaimedAt, tfProgress, tfOutcome        = 16, 17, 18, 19, 20
	tfResult, tfLastError, tfFinishedAt, tfExpireAt, tfClaims          = 21, 22, 23, 24, 25
	tfHistory, tfSchedule, tfScheduleSlot                              = 26, 100, 101
	tfCancelRequested, tfTimeoutNs, tfDeadlineAt, tfRetryOnTimeout     = 110, 111, 112, 113
	tfCancelRequestedAt, tfParents, tfWaiting, tfOnParentFailure       = 114, 130, 131, 132
	tfChildren, tfRetry, tfKey                                         = 133, 140, 150
	afClaim, afWorkerID, afFence, afClaimedAt, afLeaseUntil, afEndedAt = 1, 2, 3, 4, 5, 6
	afOutcome, afError, afCancelRequestedAt, afDeadlineAt              = 7, 8, 110, 111
	rfBase, rfCap, rfMultiplier, rfJitter                              = 1, 2, 3, 4
)

// Append appends t's deterministic encoding to b: the bytes
// proto.MarshalOptions{Deterministic: true} writes.
func Append(b []byte, t *pb.Task) ([]byte, error) {
	if !plainTask(t) {
		return marshal.MarshalAppend(b, t)
	}
	if need := taskSizeHint(t); cap(b)-len(b) < need {
		b = append(make([]byte, 0, len(b)+need), b...)
	}
	b = appendString(b, tfID, t.Id)
	b = appendString(b, tfQueue, t.Queue)
	b = appendString(b, tfTenant, t.Tenant)
	b = appendBytes(b, tfPayload, t.Payload)
	b = appendVarint(b, tfPriority, uint64(t.Priority))
	b = appendVarint(b, tfState, uint64(t.State))
	b = appendVarint(b, tfAttempts, uint64(t.Attempts))
	b = appendVarint(b, tfMaxAttempts, uint64(t.MaxAttempts))
	b = appendString(b, tfIdemKey, t.IdempotencyKey)
	b = appendVarint(b, tfRetention, uint64(t.RetentionNs))
	b = appendVarint(b, tfCreatedAt, uint64(t.CreatedAt))
	b = appendVarint(b, tfVisibleAt, uint64(t.VisibleAt))
	b = appendVarint(b, tfSeq, t.Seq)
	b = appendVarint(b, tfFence, t.Fence)
	b = appendString(b, tfWorkerID, t.WorkerId)
	b = appendVarint(b, tfLeaseNs, uint64(t.LeaseNs))
	b = appendVarint(b, tfLeaseUntil, uint64(t.LeaseUntil))
	b = appendVarint(b, tfClaimedAt, uint64(t.ClaimedAt))
	b = appendBytes(b, tfProgress, t.Progress)
	b = appendVarint(b, tfOutcome, uint64(t.Outcome))
	b = appendBytes(b, tfResult, t.Result)
	b = appendString(b, tfLastError, t.LastError)
	b = appendVarint(b, tfFinishedAt, uint64(t.FinishedAt))
	b = appendVarint(b, tfExpireAt, uint64(t.ExpireAt))
	b = appendVarint(b, tfClaims, uint64(t.Claims))
	for _, a := range t.History {
		b = protowire.AppendTag(b, tfHistory, protowire.BytesType)
		at := len(b)
		b = appendAttempt(append(b, 0), a)
		b = fixLength(b, at)
	}
	b = appendString(b, tfSchedule, t.Schedule)
	b = appendVarint(b, tfScheduleSlot, uint64(t.ScheduleSlot))
	b = appendBool(b, tfCancelRequested, t.CancelRequested)
	b = appendVarint(b, tfTimeoutNs, uint64(t.TimeoutNs))
	b = appendVarint(b, tfDeadlineAt, uint64(t.DeadlineAt))
	b = appendBool(b, tfRetryOnTimeout, t.RetryOnTimeout)
	b = appendVarint(b, tfCancelRequestedAt, uint64(t.CancelRequestedAt))
	for _, p := range t.Parents {
		b = protowire.AppendTag(b, tfParents, protowire.BytesType)
		b = protowire.AppendString(b, p)
	}
	b = appendVarint(b, tfWaiting, uint64(t.Waiting))
	b = appendVarint(b, tfOnParentFailure, uint64(t.OnParentFailure))
	b = appendVarint(b, tfChildren, uint64(t.Children))
	if r := t.Retry; r != nil {
		b = protowire.AppendTag(b, tfRetry, protowire.BytesType)
		at := len(b)
		b = append(b, 0)
		b = appendVarint(b, rfBase, uint64(r.BaseNs))
		b = appendVarint(b, rfCap, uint64(r.CapNs))
		b = appendVarint(b, rfMultiplier, uint64(r.Multiplier))
		b = appendVarint(b, rfJitter, uint64(r.JitterPercent))
		b = fixLength(b, at)
	}
	b = appendBytes(b, tfKey, t.Key)
	return b, nil
}

func appendAttempt(b []byte, a *pb.Attempt) []byte {
	b = appendVarint(b, afClaim, uint64(a.Claim))
	b = appendString(b, afWorkerID, a.WorkerId)
	b = appendVarint(b, afFence, a.Fence)
	b = appendVarint(b, afClaimedAt, uint64(a.ClaimedAt))
	b = appendVarint(b, afLeaseUntil, uint64(a.LeaseUntil))
	b = appendVarint(b, afEndedAt, uint64(a.EndedAt))
	b = appendVarint(b, afOutcome, uint64(a.Outcome))
	b = appendString(b, afError, a.Error)
	b = appendVarint(b, afCancelRequestedAt, uint64(a.CancelRequestedAt))
	return appendVarint(b, afDeadlineAt, uint64(a.DeadlineAt))
}

// plainTask says whether t is one the hand encoder writes as proto does:
// no unknown fields (a newer build's, kept through a decode) and no nil
// entry in its history.
func plainTask(t *pb.Task) bool {
	if len(t.ProtoReflect().GetUnknown()) != 0 {
		return false
	}
	if t.Retry != nil && len(t.Retry.ProtoReflect().GetUnknown()) != 0 {
		return false
	}
	for _, a := range t.History {
		if a == nil || len(a.ProtoReflect().GetUnknown()) != 0 {
			return false
		}
	}
	return true
}

// taskSizeHint is about t's encoded size, at least: one allocation for most
// records.
func taskSizeHint(t *pb.Task) int {
	n := 128 + len(t.Id) + len(t.Queue) + len(t.Tenant) + len(t.Payload) + len(t.IdempotencyKey) +
		len(t.WorkerId) + len(t.Progress) + len(t.Result) + len(t.LastError) + len(t.Schedule) + len(t.Key)
	for _, a := range t.History {
		n += 48 + len(a.WorkerId) + len(a.Error)
	}
	for _, p := range t.Parents {
		n += 3 + len(p)
	}
	return n
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendBool(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return append(protowire.AppendTag(b, num, protowire.VarintType), 1)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

// fixLength writes the length of the message that follows b[at], a byte
// reserved for it, and moves the message on when its length takes more.
func fixLength(b []byte, at int) []byte {
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, k-1)...)
	copy(b[at+k:], b[at+1:at+1+n])
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

// Decode sets t, a zero Task, from v as proto.Unmarshal would. The
// strings and bytes it sets do not alias v.
func Decode(v []byte, t *pb.Task) error {
	if decodeTaskFast(v, t) {
		return nil
	}
	return proto.Unmarshal(v, t)
}

// decodeTaskFast decodes v into t when it holds only fields this build
// knows, each in its own wire type, well formed; it says false otherwise,
// and t is then partly set.
func decodeTaskFast(v []byte, t *pb.Task) bool {
	return eachField(v,
		func(num protowire.Number, x uint64) bool { return setTaskVarint(t, num, x) },
		func(num protowire.Number, b []byte) bool { return setTaskBytes(t, num, b) })
}

// eachField hands each field of v to varint or raw by its wire type
// (raw nil: a message of varints alone). It says false at the first field
// in another wire type, malformed, or refused by its function.
func eachField(v []byte, varint func(protowire.Number, uint64) bool, raw func(protowire.Number, []byte) bool) bool {
	for len(v) > 0 {
		num, typ, n := protowire.ConsumeTag(v)
		if n < 0 {
			return false
		}
		v = v[n:]
		switch {
		case typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(v)
			if n < 0 || !varint(num, x) {
				return false
			}
			v = v[n:]
		case typ == protowire.BytesType && raw != nil:
			b, n := protowire.ConsumeBytes(v)
			if n < 0 || !raw(num, b) {
				return false
			}
			v = v[n:]
		default:
			return false
		}
	}
	return true
}

func setTaskVarint(t *pb.Task, num protowire.Number, x uint64) bool {
	switch num {
	case tfPriority:
		t.Priority = uint32(x)
	case tfState:
		t.State = pb.TaskState(int32(x))
	case tfAttempts:
		t.Attempts = uint32(x)
	case tfMaxAttempts:
		t.MaxAttempts = uint32(x)
	case tfRetention:
		t.RetentionNs = int64(x)
	case tfCreatedAt:
		t.CreatedAt = int64(x)
	case tfVisibleAt:
		t.VisibleAt = int64(x)
	case tfSeq:
		t.Seq = x
	case tfFence:
		t.Fence = x
	case tfLeaseNs:
		t.LeaseNs = int64(x)
	case tfLeaseUntil:
		t.LeaseUntil = int64(x)
	case tfClaimedAt:
		t.ClaimedAt = int64(x)
	case tfOutcome:
		t.Outcome = pb.Outcome(int32(x))
	case tfFinishedAt:
		t.FinishedAt = int64(x)
	case tfExpireAt:
		t.ExpireAt = int64(x)
	case tfClaims:
		t.Claims = uint32(x)
	case tfScheduleSlot:
		t.ScheduleSlot = int64(x)
	case tfCancelRequested:
		t.CancelRequested = x != 0
	case tfTimeoutNs:
		t.TimeoutNs = int64(x)
	case tfDeadlineAt:
		t.DeadlineAt = int64(x)
	case tfRetryOnTimeout:
		t.RetryOnTimeout = x != 0
	case tfCancelRequestedAt:
		t.CancelRequestedAt = int64(x)
	case tfWaiting:
		t.Waiting = uint32(x)
	case tfOnParentFailure:
		t.OnParentFailure = pb.ParentFailurePolicy(int32(x))
	case tfChildren:
		t.Children = uint32(x)
	default:
		return false
	}
	return true
}

func setTaskBytes(t *pb.Task, num protowire.Number, b []byte) bool {
	switch num {
	case tfPayload:
		t.Payload = copyBytes(b)
	case tfProgress:
		t.Progress = copyBytes(b)
	case tfResult:
		t.Result = copyBytes(b)
	case tfKey:
		t.Key = copyBytes(b)
	case tfHistory:
		a := &pb.Attempt{}
		if !decodeAttemptFast(b, a) {
			return false
		}
		t.History = append(t.History, a)
	case tfRetry:
		// A second occurrence merges into the first, as proto does.
		if t.Retry == nil {
			t.Retry = &pb.RetryPolicy{}
		}
		return decodeRetryFast(b, t.Retry)
	default:
		if !utf8.Valid(b) {
			return false
		}
		return setTaskString(t, num, string(b))
	}
	return true
}

func setTaskString(t *pb.Task, num protowire.Number, s string) bool {
	switch num {
	case tfID:
		t.Id = s
	case tfQueue:
		t.Queue = s
	case tfTenant:
		t.Tenant = s
	case tfIdemKey:
		t.IdempotencyKey = s
	case tfWorkerID:
		t.WorkerId = s
	case tfLastError:
		t.LastError = s
	case tfSchedule:
		t.Schedule = s
	case tfParents:
		t.Parents = append(t.Parents, s)
	default:
		return false
	}
	return true
}

func decodeAttemptFast(v []byte, a *pb.Attempt) bool {
	return eachField(v, func(num protowire.Number, x uint64) bool {
		switch num {
		case afClaim:
			a.Claim = uint32(x)
		case afFence:
			a.Fence = x
		case afClaimedAt:
			a.ClaimedAt = int64(x)
		case afLeaseUntil:
			a.LeaseUntil = int64(x)
		case afEndedAt:
			a.EndedAt = int64(x)
		case afOutcome:
			a.Outcome = pb.AttemptOutcome(int32(x))
		case afCancelRequestedAt:
			a.CancelRequestedAt = int64(x)
		case afDeadlineAt:
			a.DeadlineAt = int64(x)
		default:
			return false
		}
		return true
	}, func(num protowire.Number, b []byte) bool {
		if !utf8.Valid(b) {
			return false
		}
		switch num {
		case afWorkerID:
			a.WorkerId = string(b)
		case afError:
			a.Error = string(b)
		default:
			return false
		}
		return true
	})
}

func decodeRetryFast(v []byte, r *pb.RetryPolicy) bool {
	return eachField(v, func(num protowire.Number, x uint64) bool {
		switch num {
		case rfBase:
			r.BaseNs = int64(x)
		case rfCap:
			r.CapNs = int64(x)
		case rfMultiplier:
			r.Multiplier = uint32(x)
		case rfJitter:
			r.JitterPercent = uint32(x)
		default:
			return false
		}
		return true
	}, nil)
}

// copyBytes copies b, leaving an empty field nil as proto does.
func copyBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
