package client

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The outcome's words appear once: the server's message repeats them.
func Test_ErrorSaysTheOutcomeOnce(t *testing.T) {
	for _, tc := range []struct {
		code codes.Code
		msg  string
		want string
	}{
		{codes.Unauthenticated, "unauthenticated: no token", "docket: unauthenticated: no token"},
		{codes.PermissionDenied, "permission denied: the token does not grant tenant \"b\"", "docket: permission denied: the token does not grant tenant \"b\""},
		{codes.Unauthenticated, "unauthenticated", "docket: unauthenticated"},
		{codes.NotFound, "task 7", "docket: not found: task 7"},
	} {
		if got := mapError(status.Error(tc.code, tc.msg)).Error(); got != tc.want {
			t.Errorf("%v %q: %q, want %q", tc.code, tc.msg, got, tc.want)
		}
	}
}
