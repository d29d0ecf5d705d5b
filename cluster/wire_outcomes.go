package cluster

import "github.com/dockethq/docket/fsm"

// IsTooLarge reports whether err is, or wraps, a FieldError for a byte
// field (payload, result, progress) over its size limit: the API answers
// it ResourceExhausted rather than InvalidArgument. The FieldError's
// TooLarge says so, never the words of its reason.
func IsTooLarge(err error) bool { return fsm.IsTooLarge(err) }
