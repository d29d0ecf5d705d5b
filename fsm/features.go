package fsm

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/hashicorp/raft"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Feature levels. A level names a set of command types; a build applies
// every type up to its level. The leader proposes a type only once the
// cluster latched its level (SetFeatureLevel), which it does only when
// every server in the configuration announced that it applies the level.
// A new command type, or any change to the bytes an old type's apply
// writes (the consistency check hashes them), gets a new level.
const (
	// LevelBase: Enqueue, Claim, Heartbeat, Submit, Nack, Cancel, Reap,
	// PromoteDelayed, Purge, RequeueDead, Release and SetFeatureLevel.
	LevelBase uint32 = 1
	// LevelBatch: Batch, many client commands in one entry.
	LevelBatch uint32 = 2
	// LevelCheck: Check and CheckResult, the consistency check.
	LevelCheck uint32 = 3
	// LevelTokens: CreateToken and RevokeToken.
	LevelTokens uint32 = 4
	// LevelCounters: no new command; apply keeps lifetime totals in each
	// queue's catalog record (storage.QueueTotals, record version 2). It
	// changes the bytes apply writes, so it waits for every server.
	LevelCounters uint32 = 5
	// LevelAttempts: no new command; each claim of a task appends an
	// attempt record to the task (Task.history, history.go) and the queue
	// totals count releases (catalog record version 3). It changes the
	// bytes apply writes, so it waits for every server.
	LevelAttempts uint32 = 6
	// LevelQueueControl: SetQueuePaused and PurgeQueue, and the queue
	// configuration record (g/) a claim reads.
	LevelQueueControl uint32 = 7
	// LevelSchedules: PutSchedule, RemoveSchedule and FireSchedule, the
	// schedule records (s/) and the schedule fields of a task.
	LevelSchedules uint32 = 8
	// LevelCancelRunning: TimeOut, and Cancel of a running task (it marks
	// the task cancel-requested instead of answering WRONG_STATE); claims
	// of a task with timeout_ns get an execution deadline (o/ index).
	LevelCancelRunning uint32 = 9
	// LevelLimits: SetQueueLimits (rules_limits.go); from the latch on, the
	// tenant usage record counts running tasks (record version 2).
	LevelLimits uint32 = 10
	// LevelDependencies: no new command; an Enqueue may name parents
	// (NewTask.after, after_index) and its task waits for them
	// (rules_deps.go). Below the latch apply ignores those fields, as an
	// older build does, so an Enqueue carrying them needs this level.
	LevelDependencies uint32 = 11
	// LevelRetries: SetQueueRetry, Snooze and UpdateTask; and, changing
	// what apply writes, backoff on nack and reap, dead letters that
	// expire, and the removal of an empty queue's catalog record
	// (rules_retries.go).
	LevelRetries uint32 = 12
	// LevelSplitRecords: no new command; a task's record is written as a
	// small header (t/) and its payload once as a body (v/), so a
	// heartbeat or submit no longer rewrites the payload
	// (storage.FormatSplit). It changes the bytes apply writes, so it
	// waits for every server.
	LevelSplitRecords uint32 = 13
	// LevelIdentity: SetClusterID, the cluster's id (m/cluster-id) that
	// nodes compare before they accept a peer.
	LevelIdentity uint32 = 14
	// LevelCancelledOutcome: no new command; a task that ends CANCELLED
	// gets outcome CANCELLED, and a Submit under the fence of a claim that
	// Cancel reached ends it CANCELLED without keeping its outcome or
	// result and is answered CODE_CANCELLED (rules_cancel.go). Before the
	// latch such a Submit stored the worker's outcome and result. It
	// changes the bytes apply writes, so it waits for every server.
	LevelCancelledOutcome uint32 = 15
	// LevelFairQueues: SetKeyLimit; a task's key (NewTask.key), and the
	// per-key fields of SetQueueLimits (max_running_per_key, order,
	// per_key_pending): keyed queues count and order their tasks by key
	// (keyed.go) and store each active key under f/.
	LevelFairQueues uint32 = 16
	// LevelPendingInMemory: no new command; apply stops writing the
	// pending index (q/…/p/), whose order lives in memory alone (ready.go)
	// and is rebuilt from the task records at Open and Restore, and the
	// latch deletes every queue's pending range. It changes the bytes
	// apply writes, so it waits for every server.
	LevelPendingInMemory uint32 = 17
	// LevelRunningInMemory: no new command; apply stops writing the
	// indexes of running tasks (q/…/r/, the lease order l/ and the
	// deadline order o/), which live in memory alone (running.go) and are
	// rebuilt from the task records at Open and Restore; the latch deletes
	// them. It changes the bytes apply writes, so it waits for every
	// server.
	LevelRunningInMemory uint32 = 18
	// LevelDelayedInMemory: no new command; apply stops writing the
	// indexes of delayed tasks (q/…/d/ and the wake order w/), which live
	// in memory alone (delayed.go) and are rebuilt from the task records
	// at Open and Restore; the latch deletes them. It changes the bytes
	// apply writes, so it waits for every server.
	LevelDelayedInMemory uint32 = 19
	// LevelIdemInMemory: no new command; apply stops writing the
	// idempotency keys (i/), which live in memory alone (idem.go) and are
	// rebuilt from the task records, each of which keeps its key, at Open
	// and Restore; the latch deletes them. It changes the bytes apply
	// writes, so it waits for every server.
	LevelIdemInMemory uint32 = 20
	// LevelExpiryInMemory: no new command; apply stops writing the expiry
	// index of finished tasks and dead letters (e/), which lives in memory
	// alone (expiry.go) and is rebuilt from the task records, each of which
	// keeps its expire_at, at Open and Restore; the latch deletes it. It
	// changes the bytes apply writes, so it waits for every server.
	LevelExpiryInMemory uint32 = 21
	// LevelInlineBodies: no new command; a new task whose payload is at
	// most inlineBodyMax bytes is written whole, its payload inside its
	// record (storage.FormatInline), and stays whole: one key per write
	// instead of a header and a body. Larger payloads stay split. It
	// changes the bytes apply writes, so it waits for every server.
	LevelInlineBodies uint32 = 22

	// FeatureLevel is the highest level this build applies.
	FeatureLevel = LevelInlineBodies
)

// levelOverride lowers BuildLevel at link time
// (-ldflags "-X github.com/dockethq/docket/fsm.levelOverride=2"): the
// harness's stand-in for an older build during a rolling upgrade.
var levelOverride string

// BuildLevel is the level this binary applies: FeatureLevel, or lower when
// it was linked with a lower levelOverride. An override that is not a
// number in 1..FeatureLevel is ignored.
func BuildLevel() uint32 {
	if levelOverride == "" {
		return FeatureLevel // apply asks at every entry: no parse, no error to allocate
	}
	if v, err := strconv.ParseUint(levelOverride, 10, 32); err == nil && v >= uint64(LevelBase) && v < uint64(FeatureLevel) {
		return uint32(v)
	}
	return FeatureLevel
}

// RequiredLevel is the feature level a command of type t needs.
func RequiredLevel(t pb.CommandType) uint32 {
	switch t {
	case pb.CommandType_COMMAND_TYPE_BATCH:
		return LevelBatch
	case pb.CommandType_COMMAND_TYPE_CHECK, pb.CommandType_COMMAND_TYPE_CHECK_RESULT:
		return LevelCheck
	case pb.CommandType_COMMAND_TYPE_CREATE_TOKEN, pb.CommandType_COMMAND_TYPE_REVOKE_TOKEN:
		return LevelTokens
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_PAUSED, pb.CommandType_COMMAND_TYPE_PURGE_QUEUE:
		return LevelQueueControl
	case pb.CommandType_COMMAND_TYPE_PUT_SCHEDULE, pb.CommandType_COMMAND_TYPE_REMOVE_SCHEDULE,
		pb.CommandType_COMMAND_TYPE_FIRE_SCHEDULE:
		return LevelSchedules
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_RETRY, pb.CommandType_COMMAND_TYPE_SNOOZE,
		pb.CommandType_COMMAND_TYPE_UPDATE_TASK:
		return LevelRetries
	case pb.CommandType_COMMAND_TYPE_TIME_OUT:
		return LevelCancelRunning
	case pb.CommandType_COMMAND_TYPE_SET_QUEUE_LIMITS:
		return LevelLimits
	case pb.CommandType_COMMAND_TYPE_SET_CLUSTER_ID:
		return LevelIdentity
	case pb.CommandType_COMMAND_TYPE_SET_KEY_LIMIT:
		return LevelFairQueues
	default:
		return LevelBase
	}
}

// CommandLevel is the level cmd needs: its type's, or for a Batch the
// highest of the batch and its commands, and higher when a field needs a
// newer level (fieldLevel).
func CommandLevel(cmd *pb.Command) uint32 {
	l := max(RequiredLevel(cmd.GetType()), fieldLevel(cmd))
	for _, sub := range cmd.GetBatch().GetCommands() {
		l = max(l, RequiredLevel(sub.GetType()), fieldLevel(sub))
	}
	return l
}

// fieldLevel is the level the fields of cmd need beyond its type's: a
// field that older builds would drop must wait for every server.
func fieldLevel(cmd *pb.Command) uint32 {
	l := LevelBase
	for _, nt := range cmd.GetEnqueue().GetTasks() {
		l = max(l, newTaskLevel(nt))
	}
	if hasDeps(cmd.GetEnqueue()) {
		l = max(l, LevelDependencies)
	}
	if len(cmd.GetPutSchedule().GetSchedule().GetKey()) > 0 {
		l = max(l, LevelFairQueues)
	}
	if sl := cmd.GetSetQueueLimits(); sl != nil && (sl.MaxRunningPerKey != nil || sl.Order != nil ||
		sl.PerKeyPending != nil || sl.PerKeyPendingDepth != nil) {
		l = max(l, LevelFairQueues)
	}
	return l
}

// Extension layout: the checksum (checksum.go), then the level the command
// needs as a uvarint. A build that meets a command it cannot apply reads
// the level to say which build it needs; builds before the level ignore
// the bytes after the checksum.
func levelExtension(ext []byte, level uint32) []byte {
	return binary.AppendUvarint(ext, uint64(level))
}

// ExtensionLevel is the level an entry's proposer said its command needs;
// 0 when the entry carries none (a proposer before feature levels).
func ExtensionLevel(l *raft.Log) uint32 {
	if len(l.Extensions) <= cmdSumLen || string(l.Extensions[:len(cmdSumMagic)]) != cmdSumMagic {
		return 0
	}
	v, n := binary.Uvarint(l.Extensions[cmdSumLen:])
	if n <= 0 || v > uint64(^uint32(0)) {
		return 0
	}
	return uint32(v)
}

// tooNew is the message a node stops with when the log holds a command its
// build cannot apply: it names the level it would need.
func tooNew(l *raft.Log, have uint32, err error) string {
	need := ExtensionLevel(l)
	if need == 0 {
		return fmt.Sprintf("docket fsm: log index %d: %v: a newer build proposed it; upgrade this node (it applies feature level %d)", l.Index, err, have)
	}
	return fmt.Sprintf("docket fsm: log index %d: %v: it needs feature level %d and this build applies up to %d; upgrade this node", l.Index, err, need, have)
}

// dropUnlatched clears the fields of cmd's new tasks that need a level
// above feature, before apply validates cmd. A build below that level
// does not know them (an older leader forwards them as unknown fields)
// and so neither checks nor applies them: this build must do the same,
// or it would refuse, for a bad value, an Enqueue that older replicas
// store. The rules of each level ignore their fields below it anyway;
// clearing them first keeps Validate out of it too.
func dropUnlatched(cmd *pb.Command, feature uint32) {
	for _, sub := range cmd.GetBatch().GetCommands() {
		dropUnlatched(sub, feature)
	}
	if s := cmd.GetPutSchedule().GetSchedule(); s != nil && feature < LevelFairQueues {
		s.Key = nil
	}
	if sl := cmd.GetSetQueueLimits(); sl != nil && feature < LevelFairQueues {
		sl.MaxRunningPerKey, sl.Order, sl.PerKeyPending, sl.PerKeyPendingDepth = nil, nil, nil, nil
	}
	for _, nt := range cmd.GetEnqueue().GetTasks() {
		if feature < LevelCancelRunning {
			nt.TimeoutNs, nt.RetryOnTimeout = 0, false
		}
		if feature < LevelDependencies {
			nt.After, nt.AfterIndex, nt.OnParentFailure = nil, nil, 0
		}
		if feature < LevelRetries {
			nt.Retry = nil
		}
		if feature < LevelFairQueues {
			nt.Key = nil
		}
	}
}
