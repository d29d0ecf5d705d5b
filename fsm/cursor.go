package fsm

import (
	"errors"

	pb "github.com/dockethq/docket/proto/docketv1"
	"github.com/dockethq/docket/storage"
)

// pageErr turns storage's ErrBadCursor into the caller's mistake it is, a
// FieldError on "cursor" (InvalidArgument on the wire), and passes a page
// through otherwise. The conversion sits here, at the read API's door,
// because storage cannot name fsm's FieldError and the layers above fsm
// should not have to know storage's errors.
func pageErr[T any](items []T, next string, err error) ([]T, string, error) {
	if errors.Is(err, storage.ErrBadCursor) {
		return nil, "", &pb.FieldError{Field: "cursor", Reason: "not a cursor of this listing"}
	}
	return items, next, err
}
