package fsm

import (
	"errors"
	"testing"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_BadCursorIsAFieldError: a cursor the listing did not hand out is
// the caller's mistake, a FieldError on "cursor", from both listings.
func Test_BadCursorIsAFieldError(t *testing.T) {
	h := newHarness(t)
	for name, err := range map[string]error{
		"list":  second(h.f.ListTasks("q", "t", pb.TaskState_TASK_STATE_DEAD, "garbage", 10)),
		"stats": second(h.f.StatsPage("q", "", "garbage")),
	} {
		var fe *pb.FieldError
		if !errors.As(err, &fe) || fe.Field != "cursor" || fe.TooLarge {
			t.Errorf("%s: %v, want a FieldError on cursor", name, err)
		}
	}
}

func second[T any](_ T, _ string, err error) error { return err }
