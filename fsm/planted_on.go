//go:build plantedbugs

package fsm

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// Planted faults of the FSM, for the chaos harness to prove its checkers
// catch them (jepsen/DESIGN.md, "Planted faults"). Only a build with the
// plantedbugs tag, which no release sets, has them; DOCKET_PLANT names the
// ones on (comma-separated), read once at start, so every replica of a
// run applies the same rules and the fault is deterministic.
const (
	// PlantSubmitIgnoresFence: Submit completes a task whatever fence it
	// carries, whether another worker holds it, it waits to be claimed
	// again or it was completed already.
	PlantSubmitIgnoresFence = "submit-ignores-fence"
	// PlantRequeueForgetsTask: a requeue (nack or reap) parks the task in
	// the delayed index a century ahead, so no claim finds it again.
	PlantRequeueForgetsTask = "requeue-forgets-task"
	// PlantIdempotencyDuplicate: Enqueue never looks its idempotency key
	// up, so a retry of an applied enqueue stores a second task.
	PlantIdempotencyDuplicate = "idempotency-lets-duplicate"
	// PlantNoFlushBeforeTruncate: Persist of a Raft snapshot does not
	// flush Pebble, so Raft may compact its log above the applied index
	// Pebble holds on disk, and a crash then loses entries the log can
	// no longer replay (the crash tests of recovery_test.go catch it).
	PlantNoFlushBeforeTruncate = "no-flush-before-truncate"
	// PlantSnapshotSkipsWindow: Snapshot does not checkpoint the open
	// checkpoint window (checkpoint.go), so a snapshot labelled with the
	// applied index holds Pebble's older state, Persist's flush writes
	// none of the window, and Raft compacts its log over entries whose
	// effects were in memory only.
	PlantSnapshotSkipsWindow = "snapshot-skips-window"
)

// PlantQueueLimitOffByOne: a queue's concurrency limit (max_running)
// lets one task more run than it was set to, on every replica alike: a
// feature rule broken without breaking the log, for the queue-limit
// checker to catch.
const PlantQueueLimitOffByOne = "queue-limit-off-by-one"

// plantLimit is the rule of PlantQueueLimitOffByOne: the limit a
// SetQueueLimits stores is one above the one asked for. It works on a
// copy, since the command is the log entry's decoded value.
func plantLimit(c *pb.SetQueueLimitsCmd) *pb.SetQueueLimitsCmd {
	if !planted(PlantQueueLimitOffByOne) || c.GetMaxRunning() == 0 {
		return c
	}
	c = proto.Clone(c).(*pb.SetQueueLimitsCmd)
	m := c.GetMaxRunning() + 1
	c.MaxRunning = &m
	return c
}

// plantForgetDelay is how far ahead PlantRequeueForgetsTask parks a task:
// a century.
const plantForgetDelay = 100 * 365 * 24 * 3600 * 1_000_000_000

// Planted is the value of DOCKET_PLANT this process started with.
var Planted = os.Getenv("DOCKET_PLANT")

func planted(name string) bool {
	for _, p := range strings.Split(Planted, ",") {
		if p == name {
			return true
		}
	}
	return false
}

// PlantReaperOnFollowers: a follower reaps, by the log's time, every lease
// that expired in its own replica at the end of each apply batch, outside
// the log: its keyspace leaves the leader's.
const PlantReaperOnFollowers = "reaper-on-followers"

// plantLeader is whether this process's Raft node leads (PlantLeader); a
// node starts as a follower.
var plantLeader atomic.Bool

// PlantLeader tells the FSM whether its node leads, for
// PlantReaperOnFollowers.
func PlantLeader(on bool) { plantLeader.Store(on) }

// plantReap is the reaper of PlantReaperOnFollowers, run by applySegment
// inside its batch (so it never races an apply).
func (tx *txn) plantReap() error {
	if plantLeader.Load() || tx.index == 0 {
		return nil
	}
	entries := tx.ready.expiredLeases(tx.now, 100)
	if len(entries) == 0 {
		return nil
	}
	items := make([]*pb.ReapItem, 0, len(entries))
	for _, e := range entries {
		t, _, err := storage.GetTaskHeader(tx.r, e.ID)
		if err != nil {
			return fmt.Errorf("planted reap %s: %w", e.ID, err)
		}
		items = append(items, &pb.ReapItem{TaskId: e.ID, Fence: t.GetFence()})
	}
	return tx.reap(&pb.ReapCmd{Items: items}, &pb.CommandResult{})
}
