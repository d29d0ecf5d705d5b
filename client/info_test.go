package client

import (
	"reflect"
	"strings"
	"testing"
	"time"

	docketv1 "github.com/dockethq/docket/proto/docketv1"
)

// Every wire state maps to the State of the same name and number, and a
// value the build does not know maps to StateUnknown: a state added to
// the proto fails here until State mirrors it.
func Test_StateOfEveryWireState(t *testing.T) {
	for n, name := range docketv1.TaskState_name {
		w := docketv1.TaskState(n)
		got := StateOf(w)
		if w == docketv1.TaskState_TASK_STATE_UNSPECIFIED {
			if got != StateUnknown {
				t.Errorf("StateOf(%s) = %v, want unknown", name, got)
			}
			continue
		}
		want := strings.ToLower(strings.TrimPrefix(name, "TASK_STATE_"))
		if got.String() != want || int(got) != int(n) {
			t.Errorf("StateOf(%s) = %d %q, want %d %q", name, int(got), got, n, want)
		}
	}
	for _, w := range []docketv1.TaskState{-1, 9, 1000} {
		if got := StateOf(w); got != StateUnknown || got.String() != "unknown" {
			t.Errorf("StateOf(%d) = %d %q, want unknown", w, int(got), got)
		}
	}
	if s := State(42).String(); s != "unknown" {
		t.Errorf("State(42).String() = %q", s)
	}
}

func Test_StateFinished(t *testing.T) {
	finished := map[State]bool{StateCompleted: true, StateFailed: true, StateDead: true, StateCancelled: true}
	for s := StateUnknown; s <= StateWaiting; s++ {
		if s.Finished() != finished[s] {
			t.Errorf("%v.Finished() = %v", s, s.Finished())
		}
	}
}

// Every wire outcome maps to the Outcome of the same name and number
// (OUTCOME_UNSPECIFIED to none); an unknown value maps to OutcomeUnknown.
func Test_OutcomeOfEveryWireOutcome(t *testing.T) {
	for n, name := range docketv1.Outcome_name {
		want := strings.ToLower(strings.TrimPrefix(name, "OUTCOME_"))
		if want == "unspecified" {
			want = "none"
		}
		got := OutcomeOf(docketv1.Outcome(n))
		if got.String() != want || int(got) != int(n) {
			t.Errorf("OutcomeOf(%s) = %d %q, want %d %q", name, int(got), got, n, want)
		}
	}
	for _, w := range []docketv1.Outcome{-1, 4, 1000} {
		if got := OutcomeOf(w); got != OutcomeUnknown || got.String() != "unknown" {
			t.Errorf("OutcomeOf(%d) = %d %q, want unknown", w, int(got), got)
		}
	}
}

func Test_NewTaskInfoCarriesEveryField(t *testing.T) {
	at := func(s int64) int64 { return time.Unix(1_700_000_000+s, 0).UnixNano() }
	p := &docketv1.Task{
		Id: "t1", Queue: "q", Tenant: "acme", State: docketv1.TaskState_TASK_STATE_RUNNING, Priority: 7,
		Payload: []byte("in"), Result: []byte("out"), Outcome: docketv1.Outcome_OUTCOME_FAILED, LastError: "boom",
		Attempts: 2, MaxAttempts: 5, Fence: 99, WorkerId: "w", CancelRequested: true,
		CreatedAt: at(1), VisibleAt: at(2), ClaimedAt: at(3), LeaseUntil: at(4), DeadlineAt: at(5),
		FinishedAt: at(6), ExpireAt: at(7), Parents: []string{"a", "b"}, Waiting: 1, Schedule: "nightly",
		Key: []byte("acme-customer-7"),
	}
	tm := func(s int64) time.Time { return time.Unix(0, at(s)) }
	want := &TaskInfo{
		ID: "t1", Queue: "q", Tenant: "acme", State: StateRunning, Priority: 7,
		Payload: []byte("in"), Result: []byte("out"), Outcome: OutcomeFailed, LastError: "boom",
		Attempts: 2, MaxAttempts: 5, Fence: 99, WorkerID: "w", CancelRequested: true,
		CreatedAt: tm(1), VisibleAt: tm(2), ClaimedAt: tm(3), LeaseUntil: tm(4), DeadlineAt: tm(5),
		FinishedAt: tm(6), ExpireAt: tm(7), Parents: []string{"a", "b"}, Waiting: 1, Schedule: "nightly",
		Key: "acme-customer-7", p: p,
	}
	if got := NewTaskInfo(p); !reflect.DeepEqual(got, want) {
		t.Errorf("NewTaskInfo:\n got %+v\nwant %+v", got, want)
	}
	// A read carries no fence; the wire record stays as sent.
	if got := readInfo(p); got.Fence != 0 || got.Proto().GetFence() != 99 {
		t.Errorf("readInfo: fence %d, proto's %d; want 0 and 99", got.Fence, got.Proto().GetFence())
	}
	// Unset times are zero Times, and nil converts to nil.
	if got := NewTaskInfo(&docketv1.Task{}); !got.CreatedAt.IsZero() || !got.FinishedAt.IsZero() || got.State != StateUnknown || got.Outcome != OutcomeNone {
		t.Errorf("empty task: %+v", got)
	}
	if NewTaskInfo(nil) != nil || readInfo(nil) != nil {
		t.Error("nil task did not convert to nil")
	}
}
