package fsm

import (
	"math"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Bounds on command values. The edge (transport, before proposing) and the
// FSM (at apply) run the same Validate; only MaxPayload differs between them.
const (
	MaxNameLen        = 128
	MaxIDLen          = 64
	MaxWorkerIDLen    = 256
	MaxIdemKeyLen     = 256
	MaxErrorLen       = 64 << 10
	MaxScanLimit      = 10000
	MaxPriority       = 9
	MinLease          = time.Second
	MaxLease          = 24 * time.Hour
	MaxDelay          = 366 * 24 * time.Hour
	MaxRetention      = 366 * 24 * time.Hour
	MaxAttemptsLimit  = 1000
	DefaultMaxPayload = 1 << 20
	// PayloadCeiling is the FSM's own bound on payload, result and progress
	// bytes. The configurable edge limit is clamped to it, so every replica
	// agrees no matter how its node is configured.
	PayloadCeiling = 16 << 20
)

// A task's max_attempts and retention_ns left 0 take pb.DefaultMaxAttempts
// and pb.DefaultRetention (proto/docketv1/defaults.go), which the client
// documents too.

// MaxTime is the latest time a command may carry: 2200-01-01 UTC, in Unix
// nanoseconds. The FSM adds at most one bounded duration (MaxDelay,
// MaxLease, MaxRetention) to its time, so every time it stores stays more
// than 60 years short of the int64 limit (2262-04-11), where now + duration
// would wrap to a negative time. A fixed date, not a distance from that
// limit, so that the bound reads plainly in an error.
const MaxTime int64 = 7_258_118_400 * int64(time.Second)

// Limits are the edge's configurable bounds.
type Limits struct {
	MaxPayload int // bytes of payload, result or progress; <= PayloadCeiling
}

// DefaultLimits are used when a node sets none.
func DefaultLimits() Limits { return Limits{MaxPayload: DefaultMaxPayload} }

func (l Limits) maxPayload() int {
	if l.MaxPayload <= 0 || l.MaxPayload > PayloadCeiling {
		return PayloadCeiling
	}
	return l.MaxPayload
}

// fsmLimits are what the FSM re-checks with: the ceiling.
var fsmLimits = Limits{MaxPayload: PayloadCeiling}

// Validate checks every value of cmd against lim. It returns nil or a
// *FieldError naming the first bad field. It is pure and deterministic.
//
// Times are judged against cmd.now: a run_at may be at most MaxDelay ahead
// of it, like a delay. A command not yet stamped (now 0: at the edge,
// before the leader stamps it, or a command inside a Batch) is held only to
// the absolute bound, MaxTime + MaxDelay; the FSM judges it again at the
// time it runs.
func Validate(cmd *pb.Command, lim Limits) error {
	return validateAt(cmd, lim, cmd.GetNow())
}

// ValidateAt is Validate with times judged against at instead of cmd.now:
// the edge passes its own clock for a command the leader has not stamped
// yet, so a run_at too far ahead is refused before it costs a Raft entry.
func ValidateAt(cmd *pb.Command, lim Limits, at int64) error {
	return validateAt(cmd, lim, at)
}

// validateAt is Validate with run_at judged against at, the time the
// command runs at. The FSM passes its own time, which a Batch's commands
// share and which never runs backwards.
func validateAt(cmd *pb.Command, lim Limits, at int64) error {
	if cmd.GetNow() < 0 {
		return fieldErr("now", "negative")
	}
	if cmd.GetNow() > MaxTime {
		return fieldErr("now", "%d is past %d (2200-01-01)", cmd.GetNow(), MaxTime)
	}
	if err := checkBody(cmd); err != nil {
		return err
	}
	maxP := lim.maxPayload()
	switch cmd.GetType() {
	case pb.CommandType_COMMAND_TYPE_ENQUEUE:
		return validateEnqueue(cmd.GetEnqueue(), maxP, at)
	case pb.CommandType_COMMAND_TYPE_CLAIM:
		c := cmd.GetClaim()
		if err := checkQueue("", c.GetQueue(), c.GetTenant()); err != nil {
			return err
		}
		if err := checkLen("worker_id", c.GetWorkerId(), 1, MaxWorkerIDLen); err != nil {
			return err
		}
		if err := checkLease("lease_ns", c.GetLeaseNs(), false); err != nil {
			return err
		}
		return checkCount("max_tasks", int(c.GetMaxTasks()), 1, pb.MaxBatch)
	case pb.CommandType_COMMAND_TYPE_HEARTBEAT:
		items := cmd.GetHeartbeat().GetItems()
		if err := checkCount("items", len(items), 1, pb.MaxBatch); err != nil {
			return err
		}
		for i, it := range items {
			if err := validateHeartbeatItem(it, maxP); err != nil {
				return inItem("items", i, err)
			}
		}
	case pb.CommandType_COMMAND_TYPE_SUBMIT:
		s := cmd.GetSubmit()
		if err := checkTaskRef("", s.GetTaskId(), s.GetFence()); err != nil {
			return err
		}
		if err := checkTenantRef(s.GetTenant()); err != nil {
			return err
		}
		if o := s.GetOutcome(); o != pb.Outcome_OUTCOME_COMPLETED && o != pb.Outcome_OUTCOME_FAILED {
			return fieldErr("outcome", "must be completed or failed, got %v", o)
		}
		if len(s.GetResult()) > maxP {
			return tooLarge("result", len(s.GetResult()), maxP)
		}
		return checkLen("error", s.GetError(), 0, MaxErrorLen)
	case pb.CommandType_COMMAND_TYPE_NACK:
		n := cmd.GetNack()
		if err := checkTaskRef("", n.GetTaskId(), n.GetFence()); err != nil {
			return err
		}
		if err := checkTenantRef(n.GetTenant()); err != nil {
			return err
		}
		if err := checkDuration("delay_ns", n.GetDelayNs(), MaxDelay); err != nil {
			return err
		}
		return checkLen("reason", n.GetReason(), 0, MaxErrorLen)
	case pb.CommandType_COMMAND_TYPE_CANCEL:
		if err := checkTenantRef(cmd.GetCancel().GetTenant()); err != nil {
			return err
		}
		return checkLen("task_id", cmd.GetCancel().GetTaskId(), 1, MaxIDLen)
	case pb.CommandType_COMMAND_TYPE_CREATE_TOKEN:
		return validateCreateToken(cmd.GetCreateToken(), at)
	case pb.CommandType_COMMAND_TYPE_REVOKE_TOKEN:
		return checkName("accessor", cmd.GetRevokeToken().GetAccessor())
	case pb.CommandType_COMMAND_TYPE_REAP:
		items := cmd.GetReap().GetItems()
		if err := checkCount("items", len(items), 1, pb.MaxBatch); err != nil {
			return err
		}
		for i, it := range items {
			if err := checkTaskRef("", it.GetTaskId(), it.GetFence()); err != nil {
				return inItem("items", i, err)
			}
		}
	case pb.CommandType_COMMAND_TYPE_TIME_OUT:
		items := cmd.GetTimeOut().GetItems()
		if err := checkCount("items", len(items), 1, pb.MaxBatch); err != nil {
			return err
		}
		for i, it := range items {
			if err := checkTaskRef("", it.GetTaskId(), it.GetFence()); err != nil {
				return inItem("items", i, err)
			}
		}
	case pb.CommandType_COMMAND_TYPE_RELEASE:
		items := cmd.GetRelease().GetItems()
		if err := checkCount("items", len(items), 1, pb.MaxBatch); err != nil {
			return err
		}
		for i, it := range items {
			if err := checkTaskRef("", it.GetTaskId(), it.GetFence()); err != nil {
				return inItem("items", i, err)
			}
		}
	case pb.CommandType_COMMAND_TYPE_PROMOTE_DELAYED:
		return checkCount("limit", int(cmd.GetPromoteDelayed().GetLimit()), 1, MaxScanLimit)
	case pb.CommandType_COMMAND_TYPE_PURGE:
		return checkCount("limit", int(cmd.GetPurge().GetLimit()), 1, MaxScanLimit)
	case pb.CommandType_COMMAND_TYPE_REQUEUE_DEAD:
		r := cmd.GetRequeueDead()
		if r.GetTaskId() != "" {
			if r.GetQueue() != "" || r.GetTenant() != "" {
				return fieldErr("task_id", "give a task id or a queue, not both")
			}
			return checkLen("task_id", r.GetTaskId(), 1, MaxIDLen)
		}
		if err := checkQueue("", r.GetQueue(), r.GetTenant()); err != nil {
			return err
		}
		return checkCount("limit", int(r.GetLimit()), 1, pb.MaxBatch)
	case pb.CommandType_COMMAND_TYPE_BATCH:
		return validateBatch(cmd.GetBatch())
	case pb.CommandType_COMMAND_TYPE_CHECK:
		return nil
	case pb.CommandType_COMMAND_TYPE_CHECK_RESULT:
		return validateCheckResult(cmd.GetCheckResult())
	case pb.CommandType_COMMAND_TYPE_SET_FEATURE_LEVEL:
		return checkCount("level", int(cmd.GetSetFeatureLevel().GetLevel()), int(LevelBase), math.MaxInt32)
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_PAUSED:
		c := cmd.GetSetQueuePaused()
		return checkQueue("", c.GetQueue(), c.GetTenant())
	case pb.CommandType_COMMAND_TYPE_PURGE_QUEUE:
		c := cmd.GetPurgeQueue()
		if err := checkQueue("", c.GetQueue(), c.GetTenant()); err != nil {
			return err
		}
		return checkCount("limit", int(c.GetLimit()), 1, pb.MaxBatch)
	case pb.CommandType_COMMAND_TYPE_PUT_SCHEDULE:
		return validateSchedule(cmd.GetPutSchedule().GetSchedule(), maxP)
	case pb.CommandType_COMMAND_TYPE_REMOVE_SCHEDULE:
		c := cmd.GetRemoveSchedule()
		if err := checkName("tenant", c.GetTenant()); err != nil {
			return err
		}
		return checkName("name", c.GetName())
	case pb.CommandType_COMMAND_TYPE_FIRE_SCHEDULE:
		return validateFireSchedule(cmd.GetFireSchedule())
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_RETRY, pb.CommandType_COMMAND_TYPE_SNOOZE,
		pb.CommandType_COMMAND_TYPE_UPDATE_TASK:
		return validateRetries(cmd, at)
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS:
		return validateSetQueueLimits(cmd.GetSetQueueLimits())
	case pb.CommandType_COMMAND_TYPE_SET_CLUSTER_ID:
		return checkClusterID(cmd.GetSetClusterId().GetId())
	case pb.CommandType_COMMAND_TYPE_SET_KEY_LIMIT:
		return validateSetKeyLimit(cmd.GetSetKeyLimit())
	default:
		return fieldErr("type", "unknown command type %d", cmd.GetType())
	}
	return nil
}

// checkBody makes sure the oneof body matches the type.
func checkBody(cmd *pb.Command) error {
	var ok bool
	switch cmd.GetType() {
	case pb.CommandType_COMMAND_TYPE_ENQUEUE:
		ok = cmd.GetEnqueue() != nil
	case pb.CommandType_COMMAND_TYPE_CLAIM:
		ok = cmd.GetClaim() != nil
	case pb.CommandType_COMMAND_TYPE_HEARTBEAT:
		ok = cmd.GetHeartbeat() != nil
	case pb.CommandType_COMMAND_TYPE_SUBMIT:
		ok = cmd.GetSubmit() != nil
	case pb.CommandType_COMMAND_TYPE_NACK:
		ok = cmd.GetNack() != nil
	case pb.CommandType_COMMAND_TYPE_CANCEL:
		ok = cmd.GetCancel() != nil
	case pb.CommandType_COMMAND_TYPE_REAP:
		ok = cmd.GetReap() != nil
	case pb.CommandType_COMMAND_TYPE_PROMOTE_DELAYED:
		ok = cmd.GetPromoteDelayed() != nil
	case pb.CommandType_COMMAND_TYPE_PURGE:
		ok = cmd.GetPurge() != nil
	case pb.CommandType_COMMAND_TYPE_REQUEUE_DEAD:
		ok = cmd.GetRequeueDead() != nil
	case pb.CommandType_COMMAND_TYPE_BATCH:
		ok = cmd.GetBatch() != nil
	case pb.CommandType_COMMAND_TYPE_RELEASE:
		ok = cmd.GetRelease() != nil
	case pb.CommandType_COMMAND_TYPE_CREATE_TOKEN:
		ok = cmd.GetCreateToken() != nil
	case pb.CommandType_COMMAND_TYPE_REVOKE_TOKEN:
		ok = cmd.GetRevokeToken() != nil
	case pb.CommandType_COMMAND_TYPE_CHECK:
		ok = cmd.GetCheck() != nil
	case pb.CommandType_COMMAND_TYPE_CHECK_RESULT:
		ok = cmd.GetCheckResult() != nil
	case pb.CommandType_COMMAND_TYPE_SET_FEATURE_LEVEL:
		ok = cmd.GetSetFeatureLevel() != nil
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_PAUSED:
		ok = cmd.GetSetQueuePaused() != nil
	case pb.CommandType_COMMAND_TYPE_PURGE_QUEUE:
		ok = cmd.GetPurgeQueue() != nil
	case pb.CommandType_COMMAND_TYPE_PUT_SCHEDULE:
		ok = cmd.GetPutSchedule() != nil
	case pb.CommandType_COMMAND_TYPE_REMOVE_SCHEDULE:
		ok = cmd.GetRemoveSchedule() != nil
	case pb.CommandType_COMMAND_TYPE_FIRE_SCHEDULE:
		ok = cmd.GetFireSchedule() != nil
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_RETRY:
		ok = cmd.GetSetQueueRetry() != nil
	case pb.CommandType_COMMAND_TYPE_SNOOZE:
		ok = cmd.GetSnooze() != nil
	case pb.CommandType_COMMAND_TYPE_UPDATE_TASK:
		ok = cmd.GetUpdateTask() != nil
	case pb.CommandType_COMMAND_TYPE_TIME_OUT:
		ok = cmd.GetTimeOut() != nil
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS:
		ok = cmd.GetSetQueueLimits() != nil
	case pb.CommandType_COMMAND_TYPE_SET_CLUSTER_ID:
		ok = cmd.GetSetClusterId() != nil
	case pb.CommandType_COMMAND_TYPE_SET_KEY_LIMIT:
		ok = cmd.GetSetKeyLimit() != nil
	default:
		return fieldErr("type", "unknown command type %d", cmd.GetType())
	}
	if !ok {
		return fieldErr("body", "missing body for %v", cmd.GetType())
	}
	return nil
}

func validateEnqueue(e *pb.EnqueueCmd, maxP int, at int64) error {
	tasks := e.GetTasks()
	if err := checkCount("tasks", len(tasks), 1, pb.MaxBatch); err != nil {
		return err
	}
	for i, t := range tasks {
		if err := validateNewTask(t, maxP, at); err != nil {
			return inItem("tasks", i, err)
		}
	}
	return nil
}

// Field names of list items are built only on error: formatting
// "tasks[i]." for every valid item cost a few percent of an enqueue
// (BenchmarkApplyBatch_Enqueue).

func validateNewTask(t *pb.NewTask, maxP int, at int64) error {
	if err := checkQueue("", t.GetQueue(), t.GetTenant()); err != nil {
		return err
	}
	if n := len(t.GetKey()); n > MaxKeyBytes {
		return fieldErr("key", "%d bytes, over %d", n, MaxKeyBytes)
	}
	if len(t.GetPayload()) > maxP {
		return tooLarge("payload", len(t.GetPayload()), maxP)
	}
	if t.GetPriority() > MaxPriority {
		return fieldErr("priority", "%d not in 0..%d", t.GetPriority(), MaxPriority)
	}
	if err := checkRunAt(t.GetRunAt(), at); err != nil {
		return err
	}
	if err := checkDuration("delay_ns", t.GetDelayNs(), MaxDelay); err != nil {
		return err
	}
	if t.GetMaxAttempts() > MaxAttemptsLimit {
		return fieldErr("max_attempts", "%d > %d", t.GetMaxAttempts(), MaxAttemptsLimit)
	}
	if err := checkLen("idempotency_key", t.GetIdempotencyKey(), 0, MaxIdemKeyLen); err != nil {
		return err
	}
	if err := checkDuration("timeout_ns", t.GetTimeoutNs(), MaxDelay); err != nil {
		return err
	}
	if err := checkDuration("retention_ns", t.GetRetentionNs(), MaxRetention); err != nil {
		return err
	}
	return checkRetryPolicy("retry.", t.GetRetry())
}

func validateHeartbeatItem(it *pb.HeartbeatItem, maxP int) error {
	if err := checkTaskRef("", it.GetTaskId(), it.GetFence()); err != nil {
		return err
	}
	if err := checkTenantRef(it.GetTenant()); err != nil {
		return err
	}
	if len(it.GetProgress()) > maxP {
		return tooLarge("progress", len(it.GetProgress()), maxP)
	}
	return checkLease("lease_ns", it.GetLeaseNs(), true)
}

// inItem names the field of item i of list: "tasks[3].queue".
func inItem(list string, i int, err error) error {
	if fe, ok := err.(*pb.FieldError); ok {
		return fe.InList(list, i)
	}
	return err
}

func checkQueue(prefix, queue, tenant string) error {
	if err := checkName(prefix+"queue", queue); err != nil {
		return err
	}
	return checkName(prefix+"tenant", tenant)
}

// checkName enforces [A-Za-z0-9._-]{1,128}: no '/', so keyspace prefixes
// stay unique.
func checkName(field, s string) error {
	if len(s) == 0 || len(s) > MaxNameLen {
		return fieldErr(field, "length %d not in 1..%d", len(s), MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fieldErr(field, "byte %q at %d; allowed [A-Za-z0-9._-]", c, i)
		}
	}
	return nil
}

// checkTenantRef checks the tenant a request for one task names; empty
// (no check) is allowed.
func checkTenantRef(tenant string) error {
	if tenant == "" {
		return nil
	}
	return checkName("tenant", tenant)
}

func checkTaskRef(prefix, id string, fence uint64) error {
	if err := checkLen(prefix+"task_id", id, 1, MaxIDLen); err != nil {
		return err
	}
	if fence == 0 {
		return fieldErr(prefix+"fence", "must be set")
	}
	return nil
}

func checkLen(field, s string, lo, hi int) error {
	if len(s) < lo || len(s) > hi {
		return fieldErr(field, "length %d not in %d..%d", len(s), lo, hi)
	}
	return nil
}

func checkCount(field string, n, lo, hi int) error {
	if n < lo || n > hi {
		return fieldErr(field, "%d not in %d..%d", n, lo, hi)
	}
	return nil
}

func checkLease(field string, ns int64, zeroOK bool) error {
	if zeroOK && ns == 0 {
		return nil
	}
	if ns < int64(MinLease) || ns > int64(MaxLease) {
		return fieldErr(field, "%v not in %v..%v", time.Duration(ns), MinLease, MaxLease)
	}
	return nil
}

func checkDuration(field string, ns int64, max time.Duration) error {
	if ns < 0 || ns > int64(max) {
		return fieldErr(field, "%v not in 0..%v", time.Duration(ns), max)
	}
	return nil
}

// checkRunAt bounds run_at like delay_ns: at most MaxDelay after at, the
// time the command runs at, or after MaxTime when that is not known yet
// (at is 0). 0 means "not set".
func checkRunAt(runAt, at int64) error {
	if runAt < 0 {
		return fieldErr("run_at", "negative")
	}
	limit := MaxTime + int64(MaxDelay)
	if at > 0 {
		limit = min(limit, addTime(at, int64(MaxDelay)))
	}
	if runAt > limit {
		return fieldErr("run_at", "%d is more than %v after now (%d)", runAt, MaxDelay, at)
	}
	return nil
}

// addTime is t + d for a time and a non-negative duration, saturating at
// the int64 limit instead of wrapping to a negative time. Validate keeps
// every time the FSM computes far below it; this guards a time inherited
// from a keyspace written before those bounds existed, the same way on
// every replica.
func addTime(t, d int64) int64 {
	if d > 0 && t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}
