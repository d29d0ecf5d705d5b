package storage

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// mustOpenDB opens a real Pebble database in a temporary directory, closed
// when the test ends.
func mustOpenDB(t testing.TB) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(t.TempDir(), &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatalf("open pebble: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close pebble: %v", err)
		}
	})
	return db
}

// mustCommit applies fn to a fresh batch, commits it and flushes: the WAL
// is off (OpenDB), so only a flush makes the batch outlive Close.
func mustCommit(t testing.TB, db *pebble.DB, fn func(b *pebble.Batch) error) {
	t.Helper()
	b := db.NewBatch()
	if err := fn(b); err != nil {
		t.Fatalf("batch: %v", err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close batch: %v", err)
	}
	if err := db.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// mustStoreTask writes t and the index keys of its state, as the FSM would.
func mustStoreTask(t testing.TB, db *pebble.DB, task *pb.Task) {
	t.Helper()
	q, tn, id := task.GetQueue(), task.GetTenant(), task.GetId()
	var keys [][]byte
	switch task.GetState() {
	case pb.TaskState_TASK_STATE_PENDING:
		keys = [][]byte{PendingKey(q, tn, task.GetPriority(), task.GetSeq(), id)}
	case pb.TaskState_TASK_STATE_DELAYED:
		keys = [][]byte{DelayedKey(q, tn, task.GetVisibleAt(), id), WakeKey(task.GetVisibleAt(), id)}
	case pb.TaskState_TASK_STATE_RUNNING:
		keys = [][]byte{RunningKey(q, tn, id), LeaseKey(task.GetLeaseUntil(), id)}
	case pb.TaskState_TASK_STATE_DEAD:
		keys = [][]byte{DeadKey(q, tn, id)}
	default:
		keys = [][]byte{ExpireKey(task.GetExpireAt(), id)}
	}
	mustCommit(t, db, func(b *pebble.Batch) error {
		for _, k := range keys {
			if err := SetIndex(b, k); err != nil {
				return err
			}
		}
		_, err := PutTask(b, task)
		return err
	})
}

// ids returns the ids of tasks, in order.
func ids(tasks []*pb.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.GetId()
	}
	return out
}

// quietLogger drops Pebble's informational messages.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Errorf(string, ...interface{}) {}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf(format, args...))
}
