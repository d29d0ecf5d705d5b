package fsm

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_ReadsDuringApply: the read methods may be called from any goroutine
// while entries apply (run it with -race). A read sees one consistent
// state: a listing never fails because a task it indexed was purged
// before it read the record.
func Test_ReadsDuringApply(t *testing.T) {
	h := newHarness(t)
	logs, _ := crashLog(t, metamorphicOps()/4)
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	report := func(err error) {
		if err != nil {
			select {
			case errs <- err:
			default:
			}
		}
	}
	reader := func(fn func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				fn()
			}
		}()
	}
	queues := newWorkload(0).queues
	reader(func() {
		for _, q := range queues {
			for _, st := range []pb.TaskState{pb.TaskState_TASK_STATE_PENDING, pb.TaskState_TASK_STATE_RUNNING, pb.TaskState_TASK_STATE_DEAD} {
				_, _, err := h.f.ListTasks(q.Queue, q.Tenant, st, "", 50)
				report(err)
			}
		}
	})
	reader(func() {
		_, err := h.f.ExpiredLeases(h.f.Now()+int64(lease), 100)
		report(err)
		_, _, err = h.f.HasDue(h.f.Now())
		report(err)
	})
	reader(func() {
		_, err := h.f.Stats("", "")
		report(err)
		_, err = h.f.GetTask(TaskID(h.f.AppliedIndex(), 0))
		if err != nil && !errorsIsNotFound(err) {
			report(err)
		}
	})
	for i := 0; i < len(logs); i += 16 {
		h.f.ApplyBatch(logs[i:min(i+16, len(logs))])
		if i%512 == 0 {
			snap, err := h.f.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			snap.Release()
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("read during apply: %v", err)
	}
	checkKeyspace(t, h.f)
}

func errorsIsNotFound(err error) bool { return errors.Is(err, pb.ErrNotFound) }
