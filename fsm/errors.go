package fsm

import (
	"errors"
	"fmt"

	pb "github.com/dockethq/docket/proto/docketv1"
)

// Errors of the log and the keyspace that stop apply or open. The
// outcomes a caller branches on are the API's: pb.ErrNotFound and the
// rest, in proto/docketv1/outcomes.go.
var (
	// ErrUnknownCommand means a log entry holds a command type this build
	// does not know. Applying it would diverge, so the node stops.
	ErrUnknownCommand = errors.New("unknown command type")

	// ErrDecode means a log entry's bytes are not a Command.
	ErrDecode = errors.New("undecodable command")
	// ErrKeyspaceTooNew means the keyspace latched a feature level above
	// this build's: it may hold records the build cannot read, so Open and
	// Restore refuse it.
	ErrKeyspaceTooNew = errors.New("keyspace newer than this build")
)

func fieldErr(field, format string, args ...any) *pb.FieldError {
	return &pb.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// tooLarge is the FieldError of a byte field of n bytes over its limit.
func tooLarge(field string, n, limit int) *pb.FieldError {
	return &pb.FieldError{Field: field, Reason: fmt.Sprintf("too large: %d bytes > %d", n, limit), TooLarge: true}
}
