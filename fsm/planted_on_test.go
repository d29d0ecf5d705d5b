//go:build plantedbugs

package fsm

import (
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// plant turns the planted fault name on (or, with "", every fault off)
// for one test.
func plant(t *testing.T, name string) {
	old := Planted
	Planted = name
	t.Cleanup(func() { Planted = old })
}

// Each planted fault of the FSM does what jepsen/planted.go says, and
// nothing of it shows while DOCKET_PLANT names another fault.
func Test_PlantedFaults(t *testing.T) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		t.Run("submit-ignores-fence/"+name, func(t *testing.T) {
			plant(t, map[bool]string{false: PlantRequeueForgetsTask, true: PlantSubmitIgnoresFence}[on])
			h := newHarness(t)
			id := h.enqueue(at(0), nt("q", "t", 0))[0]
			old := h.claimOne(at(time.Second), "q", "t")
			h.one(nackCmd(at(2*time.Second), id, old.GetFence(), 0, "again"), pb.Code_CODE_OK)
			want := map[bool]pb.Code{false: pb.Code_CODE_STALE_FENCE, true: pb.Code_CODE_OK}[on]
			h.one(completeCmd(at(3*time.Second), id, old.GetFence()), want)
		})
		t.Run("requeue-forgets-task/"+name, func(t *testing.T) {
			plant(t, map[bool]string{false: PlantSubmitIgnoresFence, true: PlantRequeueForgetsTask}[on])
			h := newHarness(t)
			id := h.enqueue(at(0), nt("q", "t", 0))[0]
			c := h.claimOne(at(time.Second), "q", "t")
			h.one(nackCmd(at(2*time.Second), id, c.GetFence(), 0, "again"), pb.Code_CODE_OK)
			if got := len(h.claim(at(time.Hour), "q", "t", 1)); got != map[bool]int{false: 1, true: 0}[on] {
				t.Fatalf("claims an hour after the nack: %d", got)
			}
		})
		t.Run("idempotency-lets-duplicate/"+name, func(t *testing.T) {
			plant(t, map[bool]string{false: PlantSubmitIgnoresFence, true: PlantIdempotencyDuplicate}[on])
			h := newHarness(t)
			task := nt("q", "t", 0)
			task.IdempotencyKey = "k"
			first := h.enqueue(at(0), task)[0]
			res := h.do(enqueueCmd(at(time.Second), task)).GetItems()[0]
			if dup := res.GetTaskId() != first; dup != on || (res.GetCode() == pb.Code_CODE_DUPLICATE) == on {
				t.Fatalf("resent key: %v %s, first %s", res.GetCode(), res.GetTaskId(), first)
			}
		})
		t.Run("queue-limit-off-by-one/"+name, func(t *testing.T) {
			plant(t, map[bool]string{false: PlantSubmitIgnoresFence, true: PlantQueueLimitOffByOne}[on])
			h := limitsHarness(t)
			h.fill(at(0), "q", "a", 6)
			h.one(limitsCmd(at(0), "q", "a", u32(2), nil, nil), pb.Code_CODE_OK)
			running := 0
			for i := 0; i < 10; i++ {
				got := len(h.claim(at(time.Second), "q", "a", 1))
				if got == 0 {
					break
				}
				running += got
			}
			if want := map[bool]int{false: 2, true: 3}[on]; running != want {
				t.Fatalf("a limit of 2 let %d tasks run, want %d", running, want)
			}
		})
		t.Run("reaper-on-followers/"+name, func(t *testing.T) {
			plant(t, PlantReaperOnFollowers)
			PlantLeader(!on) // the fault acts only on a follower
			t.Cleanup(func() { PlantLeader(false) })
			h := newHarness(t)
			id := h.enqueue(at(0), nt("q", "t", 0))[0]
			h.claimOne(at(time.Second), "q", "t")
			h.enqueue(at(time.Second+2*lease), nt("other", "t", 0)) // any entry past the lease
			want := map[bool]pb.TaskState{false: pb.TaskState_TASK_STATE_RUNNING, true: pb.TaskState_TASK_STATE_PENDING}[on]
			if got := h.task(id).GetState(); got != want {
				t.Fatalf("after the lease ran out, with no Reap in the log: %v, want %v", got, want)
			}
		})
	}
}
