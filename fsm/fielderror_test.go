package fsm

import (
	"errors"
	"fmt"
	"testing"
	"time"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Test_TooLargeIsTypedNotText: "too large" is a property the validator
// sets, not a reading of the reason's words. A wrapped oversize error is
// still too large; a reason that merely starts with "too large" is not; and
// a rejection answered by the FSM keeps its type through the CommandResult.
func Test_TooLargeIsTypedNotText(t *testing.T) {
	task := nt("q", "t", 0)
	task.Payload = make([]byte, DefaultMaxPayload+1)
	err := Validate(enqueueCmd(at(0), task), DefaultLimits())
	if !pb.IsTooLarge(err) {
		t.Fatalf("Validate = %v, want too large", err)
	}
	if wrapped := fmt.Errorf("edge: %w", err); !pb.IsTooLarge(wrapped) {
		t.Errorf("a wrapped oversize error is not too large: %v", wrapped)
	}
	if fe := (&pb.FieldError{Field: "tasks[0].queue", Reason: "too large a name"}); pb.IsTooLarge(fe) {
		t.Errorf("a reason's text made %v too large", fe)
	}

	// An FSM rejection: over the FSM's own ceiling, answered as a result.
	h := newHarness(t)
	task.Payload = make([]byte, PayloadCeiling+1)
	res := h.apply(enqueueCmd(at(0), task))
	if got := pb.ResultError(res); !pb.IsTooLarge(got) || !errors.Is(got, pb.ErrInvalidArgument) {
		t.Fatalf("ResultError(%v) = %v, want a too-large FieldError", res, got)
	}
	var fe *pb.FieldError
	if !errors.As(pb.ResultError(res), &fe) || fe.Field != "tasks[0].payload" {
		t.Fatalf("ResultError names %v, want tasks[0].payload", fe)
	}
	// Inside a Batch, each command's own result carries it.
	big := submitCmd(0, "x", 1, pb.Outcome_OUTCOME_COMPLETED, string(make([]byte, PayloadCeiling+1)))
	res = h.apply(batchCmd(at(time.Second), completeCmd(0, "y", 1), big))
	if subs := res.GetResults(); len(subs) != 2 || !pb.IsTooLarge(pb.ResultError(subs[1])) || pb.IsTooLarge(pb.ResultError(subs[0])) {
		t.Fatalf("batch results %v: want only the second too large", subs)
	}

	// The detail text is for people: the same words without the type are
	// an ordinary invalid argument.
	plain := &pb.CommandResult{ErrorCode: pb.Code_CODE_INVALID_ARGUMENT, ErrorField: "result", ErrorDetail: "too large: 9 bytes > 8"}
	if got := pb.ResultError(plain); pb.IsTooLarge(got) || !errors.Is(got, pb.ErrInvalidArgument) {
		t.Errorf("ResultError(%v) = %v (too large %v), want a plain invalid argument", plain, got, pb.IsTooLarge(got))
	}
}
